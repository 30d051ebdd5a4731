package api

import (
	"encoding/json"
	"net/http"

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
	// Secret is in the answer to the creation only.
	Secret  string `json:"secret,omitempty"`
	Created int64  `json:"created"`
}

func webhookEndpointOf(e *surgepay.WebhookEndpoint) webhookEndpointJSON {
	return webhookEndpointJSON{ID: e.ID, Object: "webhook_endpoint", URL: e.URL, Description: e.Description,
		Created: e.Created.Unix()}
}

type webhookEndpointRequest struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// PaymentObject returns a payment as the API renders it, for the
// data.object of webhook events (webhook.OutboxConfig.RenderPayment).
func PaymentObject(p *surgepay.Payment) any { return paymentOf(p) }

// renderWebhook renders like render, and an endpoint without its secret:
// what an Idempotency-Key stores and replays, so that no secret is ever
// stored in the clear.
func renderWebhook(v any, err error) (int, []byte) {
	if e, ok := v.(*surgepay.WebhookEndpoint); ok && err == nil {
		return render(webhookEndpointOf(e), nil)
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

// processorWebhook applies a processor's webhook: 200 with what was done
// (applied, unchanged, duplicate, ignored, unknown_payment), 400 for a
// signature that does not verify (the processor retries, then gives up),
// 404 for a processor that is not configured, 503 to be retried.
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
