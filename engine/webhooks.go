package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

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
		var raw [webhookSecretBytes]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		s := WebhookSecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
		sealed, err := e.vault.Encrypt([]byte(s), surgepay.WebhookSecretAAD(ep.MerchantID, ep.ID))
		if err != nil {
			return fmt.Errorf("seal the secret of webhook endpoint %s: %w", ep.ID, err)
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
