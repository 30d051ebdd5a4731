package surgepay

import (
	"fmt"
	"testing"
	"time"
)

func TestWebhookDeliveryID(t *testing.T) {
	ev, ep := NewID("evt"), NewID("we")
	id := WebhookDeliveryID(ev, ep)
	gotEv, gotEp, ok := ParseWebhookDeliveryID(id)
	if !ok || gotEv != ev || gotEp != ep {
		t.Errorf("ParseWebhookDeliveryID(%q) = %q, %q, %v; want %q, %q", id, gotEv, gotEp, ok, ev, ep)
	}
	for _, bad := range []string{"", "whd_", id + "0", id[:len(id)-1], "whd_" + ev[4:] + "U" + ep[4:], "pay_" + id[4:],
		"whd_" + ev[4:] + ep[3:len(ep)-1] + "!"} {
		if _, _, ok := ParseWebhookDeliveryID(bad); ok {
			t.Errorf("ParseWebhookDeliveryID(%q) ok, want refused", bad)
		}
	}
	if WebhookDeliveryID("evt_short", ep) != "" || WebhookDeliveryID(ev, "pay_"+ep[3:]) != "" {
		t.Error("WebhookDeliveryID of IDs not of NewID's form is not empty")
	}
}

// TestWebhookDeliveryCursor: for every filter and cursor, the one-column
// condition selects exactly the deliveries after the cursor in the list's
// order, (event, endpoint) descending.
func TestWebhookDeliveryCursor(t *testing.T) {
	evs := []string{"evt_a", "evt_b", "evt_c"}
	eps := []string{"we_a", "we_b", "we_c"}
	after := func(ev, ep, cEv, cEp string) bool { return ev < cEv || ev == cEv && ep < cEp }
	for _, fEv := range append([]string{""}, evs...) {
		for _, fEp := range append([]string{""}, eps...) {
			if fEv == "" && fEp == "" {
				continue
			}
			for _, cEv := range evs {
				for _, cEp := range eps {
					f := WebhookDeliveryFilter{EventID: fEv, EndpointID: fEp, StartingAfterEvent: cEv, StartingAfterEndpoint: cEp}
					evOp, evAfter, epOp, epAfter, none := WebhookDeliveryCursor(f)
					for _, ev := range evs {
						for _, ep := range eps {
							if fEv != "" && ev != fEv || fEp != "" && ep != fEp {
								continue
							}
							got := !none
							switch evOp {
							case "<":
								got = got && ev < evAfter
							case "<=":
								got = got && ev <= evAfter
							}
							if epOp == "<" {
								got = got && ep < epAfter
							}
							if want := after(ev, ep, cEv, cEp); got != want {
								t.Errorf("filter %+v: delivery %s/%s selected %v, want %v", f, ev, ep, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestWebhookHealthOf: results are summed per endpoint in the order of
// their times; a success resets the count; results that did not try the
// endpoint are left out.
func TestWebhookHealthOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := func(ep, outcome string, s int, sent bool) *WebhookResult {
		return &WebhookResult{MerchantID: "mer_1", EndpointID: ep, Outcome: outcome, At: at(s), Sent: sent,
			Error: fmt.Sprintf("e%d", s)}
	}
	got := WebhookHealthOf([]*WebhookResult{
		r("we_b", WebhookRetry, 3, true), r("we_b", WebhookDelivered, 2, true), r("we_b", WebhookFailed, 1, true),
		r("we_a", WebhookRetry, 1, true), r("we_a", WebhookRetry, 2, true), r("we_a", WebhookFailed, 9, false),
		r("we_c", WebhookDropped, 1, true),
	})
	if len(got) != 2 {
		t.Fatalf("WebhookHealthOf = %d endpoints, want 2 (we_c dropped, not an attempt)", len(got))
	}
	a, b := got[0], got[1]
	if a.EndpointID != "we_a" || a.Reset || a.Failures != 2 || !a.LastFailure.Equal(at(2)) || a.LastError != "e2" || !a.LastSuccess.IsZero() {
		t.Errorf("we_a = %+v, want 2 more failures, last at +2s (e2), no success", a)
	}
	if b.EndpointID != "we_b" || !b.Reset || b.Failures != 1 || !b.LastSuccess.Equal(at(2)) || !b.LastFailure.Equal(at(3)) || b.LastError != "e3" {
		t.Errorf("we_b = %+v, want reset to 1 failure after the success at +2s, last failure +3s (e3)", b)
	}
}
