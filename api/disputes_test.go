package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/sim"
)

// TestSimulatorDispute: a sale of sim.AmountDisputed is disputed by the
// simulator, whose signed webhook reaches the engine as a processor's
// would: the payment gains its dispute (its status stays), with an audit
// event; a forged simulator webhook is refused on the HTTP route.
func TestSimulatorDispute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.sim.OnEvent(func(ctx context.Context, payload []byte, header http.Header) bool {
			res, err := e.eng.ApplyProcessorEvent(ctx, "default", payload, header)
			return err != nil || res == engine.EventUnknownPayment
		})
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, sim.AmountDisputed, "automatic"))
		id := sale.str("id")
		var p *response
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if p = e.must(200, e.keyA, "GET", "/v1/payments/"+id, ""); p.JSON["dispute"] != nil {
				break
			}
		}
		d, _ := p.JSON["dispute"].(map[string]any)
		if d == nil || d["status"] != "needs_response" || d["reason"] != "fraudulent" || d["amount"] != float64(sim.AmountDisputed) ||
			p.str("status") != "succeeded" {
			t.Fatalf("after the simulator's dispute: %s", p.Raw)
		}
		ev := e.must(200, e.keyA, "GET", "/v1/payments/"+id+"/events", "")
		if !strings.Contains(string(ev.Raw), `"dispute.created"`) {
			t.Fatalf("events: %s", ev.Raw)
		}
		// A sale of another amount is not disputed.
		other := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic")).str("id")
		time.Sleep(sim.DisputeDelay + 200*time.Millisecond)
		if got := e.must(200, e.keyA, "GET", "/v1/payments/"+other, ""); got.JSON["dispute"] != nil {
			t.Fatalf("a sale of 1000 was disputed: %s", got.Raw)
		}

		req, _ := http.NewRequest("POST", e.url+"/v1/processor_webhooks/default",
			strings.NewReader(`{"id":"evt_forged","type":"dispute.created","merchant":"`+e.merchants[0]+`","payment":"`+other+`"}`))
		req.Header.Set(sim.SignatureHeader, strings.Repeat("ab", 32))
		resp, err := e.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("a forged simulator webhook: %d, want 400", resp.StatusCode)
		}
	})
}
