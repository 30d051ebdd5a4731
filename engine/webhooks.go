package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/surgepay/surgepay"
)

// Webhooks: merchants register endpoints (a URL and a signing secret shown
// once); every payment change that writes audit events queues a webhook to
// each of them in its own Write (see commit), unless the merchant's
// webhooks setting is "off". Package webhook renders and delivers them.

// WebhookEndpointInput is a request to register a webhook endpoint.
type WebhookEndpointInput struct {
	URL         string
	Description string
}

// WebhookSecretPrefix starts every endpoint's signing secret.
const WebhookSecretPrefix = "whsec_"

// webhookSecretBytes is the entropy of a signing secret.
const webhookSecretBytes = 32

// commit stores w; if w records audit events of a merchant whose webhooks
// are on, the outbox first adds the webhook to w, so that the deliveries
// commit with the change or not at all. With no endpoint (the default)
// the Write is what it was: no statement more.
func (e *Engine) commit(ctx context.Context, w *surgepay.Write) error {
	ob := e.cfg.Outbox
	if ob == nil || len(w.Events) == 0 || e.SettingsFor(w.Events[0].MerchantID).Webhooks == "off" {
		return e.store.Apply(ctx, w)
	}
	ob.Prepare(w)
	err := e.store.Apply(ctx, w)
	if err == nil && w.Webhook != nil {
		ob.Committed(w)
	}
	return err
}

// webhookStore returns the store of endpoints: Config.Webhooks, else the
// Store if it has the capability.
func (e *Engine) webhookStore() (surgepay.WebhookStore, error) {
	if e.cfg.Webhooks != nil {
		return e.cfg.Webhooks, nil
	}
	if ws, ok := e.store.(surgepay.WebhookStore); ok {
		return ws, nil
	}
	return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "webhooks_unavailable",
		Message: "webhooks are not available on this server's store"}
}

func webhookLockKey(merchantID string) string { return merchantID + "\x00webhook_endpoints" }

// CreateWebhookEndpoint registers a URL for the call's merchant and
// returns the endpoint and its signing secret. The secret is shown once:
// only its sealed form is stored. With an Idempotency-Key, a repeat
// answers what the first request stored: the endpoint without its secret.
// A merchant has at most surgepay.WebhookEndpointsPerMerchantMax
// endpoints (EUNPROCESS "too_many_webhook_endpoints").
func (e *Engine) CreateWebhookEndpoint(ctx context.Context, call *Call, in *WebhookEndpointInput) (*surgepay.WebhookEndpoint, string, error) {
	if err := surgepay.ValidateWebhookURL("url", in.URL); err != nil {
		return nil, "", err
	}
	if err := surgepay.ValidateText("description", in.Description); err != nil {
		return nil, "", err
	}
	if _, err := e.webhookStore(); err != nil {
		return nil, "", err
	}
	var out *surgepay.WebhookEndpoint
	var secret string
	err := e.idempotent(ctx, call, func() error {
		// Creates of one merchant are serialised on this node, so that two
		// at once cannot both pass the bound.
		unlock := e.payLocks.lock(webhookLockKey(call.MerchantID))
		defer unlock()
		ep := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: call.MerchantID, URL: in.URL,
			Description: in.Description, Created: e.now()}
		s, sealed, err := e.newWebhookSecret(ep)
		if err != nil {
			return err
		}
		ep.SealedSecret = sealed
		w := &surgepay.Write{WebhookEndpointInsert: ep}
		e.attach(call, w, ep, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		if e.cfg.Outbox != nil {
			e.cfg.Outbox.EndpointsChanged(call.MerchantID, true)
		}
		out, secret = ep, s
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, secret, nil
}

// GetWebhookEndpoint returns an endpoint of the call's merchant.
func (e *Engine) GetWebhookEndpoint(ctx context.Context, call *Call, id string) (*surgepay.WebhookEndpoint, error) {
	ws, err := e.webhookStore()
	if err != nil {
		return nil, err
	}
	return ws.FindWebhookEndpoint(ctx, call.MerchantID, id)
}

// ListWebhookEndpoints returns the call's merchant's endpoints, newest
// first: all of them, at most surgepay.WebhookEndpointsPerMerchantMax.
func (e *Engine) ListWebhookEndpoints(ctx context.Context, call *Call) ([]*surgepay.WebhookEndpoint, error) {
	ws, err := e.webhookStore()
	if err != nil {
		return nil, err
	}
	return ws.ListWebhookEndpoints(ctx, call.MerchantID)
}

// DeleteWebhookEndpoint deletes an endpoint of the call's merchant. Its
// pending deliveries are dropped, not sent.
func (e *Engine) DeleteWebhookEndpoint(ctx context.Context, call *Call, id string) (*surgepay.WebhookEndpoint, error) {
	ws, err := e.webhookStore()
	if err != nil {
		return nil, err
	}
	var out *surgepay.WebhookEndpoint
	err = e.idempotent(ctx, call, func() error {
		unlock := e.payLocks.lock(webhookLockKey(call.MerchantID))
		defer unlock()
		ep, err := ws.FindWebhookEndpoint(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		w := &surgepay.Write{WebhookEndpointDelete: ep}
		e.attach(call, w, &Deleted{ID: ep.ID, Object: "webhook_endpoint"}, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		if e.cfg.Outbox != nil {
			// Another node may add one meanwhile: its refresh tells.
			rest, err := ws.ListWebhookEndpoints(ctx, call.MerchantID)
			if err == nil {
				e.cfg.Outbox.EndpointsChanged(call.MerchantID, len(rest) > 0)
			}
		}
		out = ep
		return nil
	})
	return out, err
}

// Webhooks for operators: the deliveries listed with their status, one
// resent, an endpoint's secret rolled with an overlap window.

// dispatcherWaker is the optional capability of an Outbox to wake this
// node's dispatcher (webhook.Outbox has it): a resend is then attempted
// at once rather than at the dispatcher's next poll.
type dispatcherWaker interface{ WakeDispatcher() }

// ListWebhookDeliveries returns a page of the call's merchant's
// deliveries that f selects, newest event first (f.Validate's errors name
// the API's parameters).
func (e *Engine) ListWebhookDeliveries(ctx context.Context, call *Call, f surgepay.WebhookDeliveryFilter) ([]*surgepay.WebhookDeliveryInfo, bool, error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	ws, err := e.webhookStore()
	if err != nil {
		return nil, false, err
	}
	ds, more, err := ws.ListWebhookDeliveries(ctx, call.MerchantID, f)
	now := e.now()
	for _, d := range ds {
		endedLease(d, now)
	}
	return ds, more, err
}

// endedLease clears InFlight of a delivery whose lease ended before now:
// its dispatcher died or could not record the attempt, and the delivery
// is due again.
func endedLease(d *surgepay.WebhookDeliveryInfo, now time.Time) {
	if d.InFlight && !d.NextAttempt.After(now) {
		d.InFlight = false
	}
}

// GetWebhookDelivery returns a delivery of the call's merchant by its ID
// (surgepay.WebhookDeliveryID); ENOTFOUND for another merchant's, or one
// past its retention.
func (e *Engine) GetWebhookDelivery(ctx context.Context, call *Call, id string) (*surgepay.WebhookDeliveryInfo, error) {
	ev, ep, ok := surgepay.ParseWebhookDeliveryID(id)
	if !ok {
		return nil, surgepay.NotFound("id", "webhook delivery")
	}
	ws, err := e.webhookStore()
	if err != nil {
		return nil, err
	}
	d, err := ws.FindWebhookDelivery(ctx, call.MerchantID, ev, ep)
	if err != nil {
		return nil, err
	}
	endedLease(d, e.now())
	return d, nil
}

// ResendWebhookDelivery queues a delivery of the call's merchant again: it
// becomes pending, due now, with a fresh set of attempts, and goes through
// the dispatcher like any other (its bound per endpoint included). An
// endpoint that never had the event (created after it) gets it, a copy of
// the event's delivery to another endpoint, as long as one is kept. It is
// refused while an attempt is in flight (ECONFLICT
// "webhook_delivery_in_flight": retry once it ends), after
// surgepay.WebhookResendsMax resends (EUNPROCESS
// "too_many_webhook_resends"), and if its endpoint was deleted
// (ENOTFOUND). A pending delivery waiting for its next retry is made due
// now. With an Idempotency-Key a repeat answers the first result and
// queues nothing more.
func (e *Engine) ResendWebhookDelivery(ctx context.Context, call *Call, id string) (*surgepay.WebhookDeliveryInfo, error) {
	evID, epID, ok := surgepay.ParseWebhookDeliveryID(id)
	if !ok {
		return nil, surgepay.NotFound("id", "webhook delivery")
	}
	ws, err := e.webhookStore()
	if err != nil {
		return nil, err
	}
	var out *surgepay.WebhookDeliveryInfo
	err = e.idempotent(ctx, call, func() error {
		now := e.now()
		d, err := ws.FindWebhookDelivery(ctx, call.MerchantID, evID, epID)
		copied := false
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			// One event to one endpoint that never had it (created after
			// the event): a copy of the event's delivery to another.
			d, err = e.webhookEventKept(ctx, ws, call.MerchantID, evID, epID)
			copied = true
		}
		if err != nil {
			return err
		}
		endedLease(d, now)
		switch {
		case d.InFlight:
			return &surgepay.Error{Code: surgepay.ECONFLICT, Reason: "webhook_delivery_in_flight", RetryAfter: 10,
				Message: "an attempt at this delivery is in flight; resend it once the attempt ends"}
		case d.Resends >= surgepay.WebhookResendsMax:
			return &surgepay.Error{Code: surgepay.EUNPROCESS, Reason: "too_many_webhook_resends",
				Message: fmt.Sprintf("a delivery may be resent at most %d times", surgepay.WebhookResendsMax)}
		}
		if _, err := ws.FindWebhookEndpoint(ctx, call.MerchantID, epID); err != nil {
			if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
				return surgepay.NotFound("id", "webhook endpoint of this delivery")
			}
			return err
		}
		next := *d
		next.Status, next.Attempts, next.InFlight, next.NextAttempt = surgepay.WebhookStatusPending, 0, false, now
		next.Resends++
		w := &surgepay.Write{WebhookResend: &surgepay.WebhookResend{MerchantID: call.MerchantID, EventID: evID,
			EndpointID: epID, At: now, Copy: copied}, Audit: e.operatorResendAudit(call, d, id)}
		e.attach(call, w, &next, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		e.log.Info("webhook delivery resent", "merchant", call.MerchantID, "event", evID, "endpoint", epID,
			"resends", next.Resends, "key", call.KeyID, "request_id", call.RequestID)
		if wk, ok := e.cfg.Outbox.(dispatcherWaker); ok {
			wk.WakeDispatcher()
		}
		out = &next
		return nil
	})
	return out, err
}

// webhookEventKept returns what a delivery of an event to endpointID will
// be, from the event's delivery to another endpoint of the merchant, as
// if it had never been attempted; ENOTFOUND if the merchant keeps none.
func (e *Engine) webhookEventKept(ctx context.Context, ws surgepay.WebhookStore, merchantID, eventID, endpointID string) (*surgepay.WebhookDeliveryInfo, error) {
	ds, _, err := ws.ListWebhookDeliveries(ctx, merchantID, surgepay.WebhookDeliveryFilter{EventID: eventID, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, surgepay.NotFound("id", "webhook delivery")
	}
	return &surgepay.WebhookDeliveryInfo{EventID: eventID, EndpointID: endpointID, MerchantID: merchantID,
		PaymentID: ds[0].PaymentID, Type: ds[0].Type, Status: surgepay.WebhookStatusPending, Created: ds[0].Created}, nil
}

// RollWebhookSecret gives an endpoint of the call's merchant a new signing
// secret and returns the endpoint and the secret, shown once (only its
// sealed form is stored). The secret it replaces keeps signing deliveries
// beside the new one for overlap (0 to surgepay.WebhookSecretOverlapMax;
// 0 ends it at once), so that receivers switch at their pace: each
// delivery carries a v1 signature under each. A secret that an earlier
// roll kept for its overlap is dropped: at most two secrets sign. Two
// rolls at once: one fails (ECONFLICT "concurrent_update"). With an
// Idempotency-Key, a repeat answers the endpoint without the secret.
func (e *Engine) RollWebhookSecret(ctx context.Context, call *Call, id string, overlap time.Duration) (*surgepay.WebhookEndpoint, string, error) {
	if overlap < 0 || overlap > surgepay.WebhookSecretOverlapMax {
		return nil, "", surgepay.Invalid("expires_in", "invalid_value", "expires_in must be 0 to %d seconds",
			int64(surgepay.WebhookSecretOverlapMax/time.Second))
	}
	ws, err := e.webhookStore()
	if err != nil {
		return nil, "", err
	}
	var out *surgepay.WebhookEndpoint
	var secret string
	err = e.idempotent(ctx, call, func() error {
		unlock := e.payLocks.lock(webhookLockKey(call.MerchantID))
		defer unlock()
		ep, err := ws.FindWebhookEndpoint(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		s, sealed, err := e.newWebhookSecret(ep)
		if err != nil {
			return err
		}
		roll := &surgepay.WebhookEndpointRoll{MerchantID: ep.MerchantID, EndpointID: ep.ID, SealedSecret: sealed,
			PreviousSealedSecret: ep.SealedSecret, PreviousSecretExpires: e.now().Add(overlap)}
		next := *ep
		next.SealedSecret, next.PreviousSealedSecret, next.PreviousSecretExpires = sealed, ep.SealedSecret, roll.PreviousSecretExpires
		w := &surgepay.Write{WebhookEndpointRoll: roll}
		e.attach(call, w, &next, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		// For the operator's record (a leak is often why): never the secret.
		e.log.Info("webhook endpoint secret rolled", "merchant", ep.MerchantID, "endpoint", ep.ID,
			"key", call.KeyID, "request_id", call.RequestID, "old_secret_until", roll.PreviousSecretExpires.Format(time.RFC3339))
		out, secret = &next, s
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, secret, nil
}

// newWebhookSecret returns a new signing secret for ep and its sealed form.
func (e *Engine) newWebhookSecret(ep *surgepay.WebhookEndpoint) (string, []byte, error) {
	var raw [webhookSecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, err
	}
	s := WebhookSecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sealed, err := e.vault.Encrypt([]byte(s), surgepay.WebhookSecretAAD(ep.MerchantID, ep.ID))
	if err != nil {
		return "", nil, fmt.Errorf("seal the secret of webhook endpoint %s: %w", ep.ID, err)
	}
	return s, sealed, nil
}
