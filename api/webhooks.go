package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// Webhook endpoints: POST, GET (list and one) and DELETE
// /v1/webhook_endpoints. docs/webhooks.md describes the deliveries.

type webhookEndpointJSON struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	URL         string `json:"url"`
	Description string `json:"description"`
	// Secret is in the answer to the creation and to a roll only.
	Secret  string `json:"secret,omitempty"`
	Created int64  `json:"created"`
	// Health: healthy (the last attempt succeeded, or none yet), degraded
	// (failures in a row, fewer than surgepay.WebhookFailingStreak),
	// failing (that many or more).
	Health         string  `json:"health"`
	FailuresInARow int     `json:"failures_in_a_row"`
	LastSuccess    *int64  `json:"last_success"`
	LastFailure    *int64  `json:"last_failure"`
	LastError      *string `json:"last_error"`
	// PreviousSecretExpires is when the secret a roll replaced stops
	// signing deliveries; null if none does.
	PreviousSecretExpires *int64 `json:"previous_secret_expires"`
}

// Values of webhookEndpointJSON.Health.
const (
	webhookHealthy  = "healthy"
	webhookDegraded = "degraded"
	webhookFailing  = "failing"
)

func unixOrNull(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	u := t.Unix()
	return &u
}

func webhookEndpointOf(e *surgepay.WebhookEndpoint) webhookEndpointJSON {
	j := webhookEndpointJSON{ID: e.ID, Object: "webhook_endpoint", URL: e.URL, Description: e.Description,
		Created: e.Created.Unix(), Health: webhookHealthy, FailuresInARow: e.FailuresInARow,
		LastSuccess: unixOrNull(e.LastSuccess), LastFailure: unixOrNull(e.LastFailure)}
	switch {
	case e.FailuresInARow >= surgepay.WebhookFailingStreak:
		j.Health = webhookFailing
	case e.FailuresInARow > 0:
		j.Health = webhookDegraded
	}
	if e.LastError != "" {
		j.LastError = &e.LastError
	}
	if len(e.PreviousSealedSecret) > 0 && time.Now().Before(e.PreviousSecretExpires) {
		j.PreviousSecretExpires = unixOrNull(e.PreviousSecretExpires)
	}
	return j
}

// webhookDeliveryJSON is a delivery of an event to an endpoint, without
// the event's body.
type webhookDeliveryJSON struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Event     string `json:"event"`
	Endpoint  string `json:"endpoint"`
	EventType string `json:"event_type"`
	Payment   string `json:"payment"`
	Status    string `json:"status"`
	InFlight  bool   `json:"in_flight"`
	Attempts  int    `json:"attempts"`
	// NextAttempt is when a pending delivery is due (or its attempt in
	// flight times out); null once it is finished.
	NextAttempt    *int64  `json:"next_attempt"`
	LastAttempt    *int64  `json:"last_attempt"`
	LastHTTPStatus *int    `json:"last_http_status"`
	LastError      *string `json:"last_error"`
	Resends        int     `json:"resends"`
	Created        int64   `json:"created"`
}

func webhookDeliveryOf(d *surgepay.WebhookDeliveryInfo) webhookDeliveryJSON {
	j := webhookDeliveryJSON{ID: surgepay.WebhookDeliveryID(d.EventID, d.EndpointID), Object: "webhook_delivery",
		Event: d.EventID, Endpoint: d.EndpointID, EventType: d.Type, Payment: d.PaymentID, Status: d.Status,
		InFlight: d.InFlight, Attempts: d.Attempts, NextAttempt: unixOrNull(d.NextAttempt),
		LastAttempt: unixOrNull(d.LastAttempt), Resends: d.Resends, Created: d.Created.Unix()}
	if d.LastStatus != 0 {
		j.LastHTTPStatus = &d.LastStatus
	}
	if d.LastError != "" {
		j.LastError = &d.LastError
	}
	return j
}

type rollSecretRequest struct {
	// ExpiresIn is how long, in seconds, the replaced secret keeps signing
	// deliveries: 0 to 604800 (7 days); default 86400 (24 hours).
	ExpiresIn *int64 `json:"expires_in"`
}

type webhookEndpointRequest struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// PaymentObject returns a payment as the API renders it, for the
// data.object of webhook events (webhook.OutboxConfig.RenderPayment).
func PaymentObject(p *surgepay.Payment) any { return paymentOf(p) }

// renderWebhook renders like render, an endpoint without its secret (what
// an Idempotency-Key stores and replays, so that no secret is ever stored
// in the clear), and a delivery.
func renderWebhook(v any, err error) (int, []byte) {
	if err == nil {
		switch x := v.(type) {
		case *surgepay.WebhookEndpoint:
			return render(webhookEndpointOf(x), nil)
		case *surgepay.WebhookDeliveryInfo:
			return render(webhookDeliveryOf(x), nil)
		}
	}
	return render(v, err)
}

func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req webhookEndpointRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	call.Render = renderWebhook
	ep, secret, err := s.eng.CreateWebhookEndpoint(r.Context(), call, &engine.WebhookEndpointInput{
		URL: req.URL, Description: req.Description})
	if err != nil {
		return s.write(w, r, call, nil, err)
	}
	// The one answer with the secret: not the stored rendering.
	out := webhookEndpointOf(ep)
	out.Secret = secret
	return s.write(w, r, nil, out, nil)
}

func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	eps, err := s.eng.ListWebhookEndpoints(r.Context(), call)
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(eps, false, webhookEndpointOf), nil)
}

func (s *Server) getWebhookEndpoint(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	ep, err := s.eng.GetWebhookEndpoint(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, nil, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, nil, webhookEndpointOf(ep), nil)
}

func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	if err := s.emptyBody(w, r, call); err != nil {
		return err
	}
	ep, err := s.eng.DeleteWebhookEndpoint(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, call, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, call, &engine.Deleted{ID: ep.ID, Object: "webhook_endpoint"}, nil)
}

// rollWebhookSecret gives an endpoint a new secret, shown once, and keeps
// the replaced one signing for expires_in seconds.
func (s *Server) rollWebhookSecret(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req rollSecretRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	overlap := surgepay.WebhookSecretOverlapDefault
	if req.ExpiresIn != nil {
		limit := int64(surgepay.WebhookSecretOverlapMax / time.Second)
		if *req.ExpiresIn < 0 || *req.ExpiresIn > limit {
			return surgepay.Invalid("expires_in", "invalid_value", "expires_in must be 0 to %d seconds", limit)
		}
		overlap = time.Duration(*req.ExpiresIn) * time.Second
	}
	call.Render = renderWebhook
	ep, secret, err := s.eng.RollWebhookSecret(r.Context(), call, r.PathValue("id"), overlap)
	if err != nil {
		return s.write(w, r, call, nil, notFoundParam(err, "id"))
	}
	out := webhookEndpointOf(ep)
	out.Secret = secret
	return s.write(w, r, nil, out, nil)
}

// listWebhookDeliveries lists the deliveries of an endpoint and/or of an
// event, newest event first, in pages.
func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := surgepay.WebhookDeliveryFilter{EndpointID: q.Get("endpoint"), EventID: q.Get("event"), Status: q.Get("status"),
		Limit: page.Limit}
	for _, p := range []struct{ name, value, prefix string }{{"endpoint", f.EndpointID, "we_"}, {"event", f.EventID, "evt_"}} {
		if p.value != "" && (len(p.value) > 64 || !strings.HasPrefix(p.value, p.prefix)) {
			return surgepay.Invalid(p.name, "invalid_value", "%s must be an ID starting %s", p.name, p.prefix)
		}
	}
	if page.StartingAfter != "" {
		ev, ep, ok := surgepay.ParseWebhookDeliveryID(page.StartingAfter)
		if !ok {
			return surgepay.Invalid("starting_after", "invalid_value", "starting_after must be a webhook delivery ID (whd_...)")
		}
		f.StartingAfterEvent, f.StartingAfterEndpoint = ev, ep
	}
	ds, more, err := s.eng.ListWebhookDeliveries(r.Context(), call, f)
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(ds, more, webhookDeliveryOf), nil)
}

func (s *Server) getWebhookDelivery(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	d, err := s.eng.GetWebhookDelivery(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, nil, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, nil, webhookDeliveryOf(d), nil)
}

// resendWebhookDelivery queues a delivery again, through the dispatcher.
func (s *Server) resendWebhookDelivery(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	if err := decode(b, &struct{}{}); err != nil {
		return err
	}
	call.Render = renderWebhook
	d, err := s.eng.ResendWebhookDelivery(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, call, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, call, webhookDeliveryOf(d), nil)
}

// processorWebhook applies a processor's webhook: 200 with what was done
// (applied, unchanged, duplicate, ignored, unknown_payment), 400 for a
// signature that does not verify (the processor retries, then gives up),
// 404 for a processor that is not configured, 413 for a body over
// surgepay.ProcessorEventBytesMax (answered by admit, through
// processorEventTooLarge), 503 to be retried.
func (s *Server) processorWebhook(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r) // read by admit, within surgepay.ProcessorEventBytesMax
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	done, err := s.eng.ApplyProcessorEvent(r.Context(), r.PathValue("processor"), body, r.Header)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, _ := json.Marshal(map[string]any{"received": true, "result": done})
	s.writeRaw(w, r, http.StatusOK, b)
}

// A processor's webhook whose body is over surgepay.ProcessorEventBytesMax
// is answered 413, then the rest of its body is read and discarded, at
// most processorEventDrainBytesMax more within processorEventDrainWait,
// before the connection is closed: a connection closed with the body
// unread is reset, and a client that writes its whole body before it
// reads the answer got a broken pipe or a reset instead of the answer.
// Past either bound the connection is closed anyway: what a sender may
// make the server read stays bounded.
const (
	processorEventDrainBytesMax = 16 << 20
	processorEventDrainWait     = 2 * time.Second
)

// processorEventTooLarge answers a processor's webhook whose body was cut
// at surgepay.ProcessorEventBytesMax (err, body_too_large): 413 with the
// API's error body ({type, code, message, param}), Connection: close, and
// then drains the body (processorEventDrainBytesMax). admit calls it with
// the processor's slot still held, so that the drain counts against it.
func (s *Server) processorEventTooLarge(w http.ResponseWriter, r *http.Request, err error) {
	rc := http.NewResponseController(w)
	// Full duplex keeps the body readable once the answer is sent (HTTP/1
	// otherwise stops reading it); a writer that is not a connection's
	// (ErrNotSupported, a unit test) has no socket to reset.
	duplex := rc.EnableFullDuplex() == nil
	s.observe(r, nil, err)
	_, body := render(nil, err)
	w.Header().Set("Connection", "close")
	s.writeRaw(w, r, http.StatusRequestEntityTooLarge, body)
	if !duplex || rc.Flush() != nil {
		return
	}
	if rc.SetReadDeadline(time.Now().Add(processorEventDrainWait)) == nil {
		_, _ = io.CopyN(io.Discard, r.Body, processorEventDrainBytesMax)
	}
}
