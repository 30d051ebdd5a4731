package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
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
		ds, _ := p.JSON["disputes"].([]any)
		if d == nil || d["status"] != "needs_response" || d["reason"] != "fraudulent" || d["amount"] != float64(sim.AmountDisputed) ||
			p.str("status") != "succeeded" || len(ds) != 1 {
			t.Fatalf("after the simulator's dispute: %s", p.Raw)
		}
		// Its deadline: the simulator's response window after it was filed.
		if due, _ := d["due_by"].(float64); int64(due) < int64(p.JSON["created"].(float64))+int64(sim.DisputeResponseWindow/time.Second)-1 {
			t.Fatalf("the dispute's due_by = %v, want the simulator's window after the sale: %s", d["due_by"], p.Raw)
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

// unsignedEvents is the simulator, whose webhooks a test writes itself:
// ParseEvent reads a surgepay.ProcessorEvent as JSON, unsigned.
type unsignedEvents struct{ *sim.Provider }

func (unsignedEvents) ParseEvent(_ string, payload []byte, _ http.Header) (*surgepay.ProcessorEvent, error) {
	var ev surgepay.ProcessorEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, surgepay.Invalid("body", "invalid_json", "%v", err)
	}
	return &ev, nil
}

// TestProcessorDisputeSecondKeepsFirst: a second dispute on a payment is
// added beside the first, which was lost, and each change is applied to
// the dispute of its id; the payment lists both (a second dispute
// replaced the first on the payment), and its events show each.
func TestProcessorDisputeSecondKeepsFirst(t *testing.T) {
	e := newEnvWith(t, testenv.OpenSQLite(t), func(c *engine.Config) { c.Provider = unsignedEvents{c.Provider.(*sim.Provider)} })
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	id := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic")).str("id")
	post := func(ev surgepay.ProcessorEvent, want string) {
		t.Helper()
		ev.MerchantID, ev.PaymentID = e.merchants[0], id
		p, err := e.store.FindPayment(context.Background(), e.merchants[0], id)
		if err != nil {
			t.Fatal(err)
		}
		ev.PaymentRef = p.AuthorizationRef
		body, _ := json.Marshal(ev)
		r := e.do("", "POST", "/v1/processor_webhooks/default", string(body), "")
		if r.Status != 200 || r.str("result") != want {
			t.Fatalf("event %s (%s %s %s): got %d %s, want 200 %s", ev.ID, ev.Kind, ev.DisputeID, ev.Status, r.Status, r.Raw, want)
		}
	}
	post(surgepay.ProcessorEvent{ID: "evt_1", Kind: surgepay.ProcessorEventDisputeCreated, DisputeID: "dp_1",
		Status: "needs_response", Amount: 1000, Reason: "fraudulent"}, engine.EventApplied)
	post(surgepay.ProcessorEvent{ID: "evt_2", Kind: surgepay.ProcessorEventDisputeClosed, DisputeID: "dp_1",
		Status: "lost", Amount: 1000, Reason: "fraudulent"}, engine.EventApplied)
	post(surgepay.ProcessorEvent{ID: "evt_3", Kind: surgepay.ProcessorEventDisputeCreated, DisputeID: "dp_2",
		Status: "needs_response", Amount: 400, Reason: "duplicate"}, engine.EventApplied)
	post(surgepay.ProcessorEvent{ID: "evt_4", Kind: surgepay.ProcessorEventDisputeUpdated, DisputeID: "dp_2",
		Status: "under_review", Amount: 400, Reason: "duplicate"}, engine.EventApplied)
	post(surgepay.ProcessorEvent{ID: "evt_4", Kind: surgepay.ProcessorEventDisputeUpdated, DisputeID: "dp_2",
		Status: "under_review", Amount: 400, Reason: "duplicate"}, engine.EventDuplicate)
	// The same state again under a new event id: nothing changes.
	post(surgepay.ProcessorEvent{ID: "evt_5", Kind: surgepay.ProcessorEventDisputeUpdated, DisputeID: "dp_1",
		Status: "lost", Amount: 1000}, engine.EventUnchanged)
	// A new deadline alone is a change (the processor extended it).
	due := time.Date(2026, 3, 9, 23, 59, 59, 0, time.UTC)
	post(surgepay.ProcessorEvent{ID: "evt_6", Kind: surgepay.ProcessorEventDisputeUpdated, DisputeID: "dp_2",
		Status: "under_review", Amount: 400, DueBy: due}, engine.EventApplied)

	var p struct {
		Status  string `json:"status"`
		Dispute *struct {
			ID string `json:"id"`
		} `json:"dispute"`
		Disputes []struct {
			ID, Status, Reason string
			Amount             int64
			Created, Updated   int64
		} `json:"disputes"`
	}
	if err := json.Unmarshal(e.must(200, e.keyA, "GET", "/v1/payments/"+id, "").Raw, &p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range p.Disputes {
		got = append(got, d.ID+" "+d.Status+" "+d.Reason+" "+strconv.FormatInt(d.Amount, 10))
		if d.Created == 0 || d.Updated < d.Created {
			t.Fatalf("dispute %s: created %d, updated %d; want created, and updated no earlier", d.ID, d.Created, d.Updated)
		}
	}
	if want := "dp_1 lost fraudulent 1000,dp_2 under_review duplicate 400"; strings.Join(got, ",") != want {
		t.Fatalf("disputes: got %s, want %s", strings.Join(got, ","), want)
	}
	if p.Status != "succeeded" || p.Dispute == nil || p.Dispute.ID != "dp_2" {
		t.Fatalf("status %s, dispute %+v: want succeeded, the last opened (dp_2)", p.Status, p.Dispute)
	}
	var events struct {
		Data []struct{ Type string } `json:"data"`
	}
	if err := json.Unmarshal(e.must(200, e.keyA, "GET", "/v1/payments/"+id+"/events", "").Raw, &events); err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, ev := range events.Data {
		trail = append(trail, ev.Type)
	}
	if want := "authorization,capture,dispute.created,dispute.closed,dispute.created,dispute.updated,dispute.updated"; strings.Join(trail, ",") != want {
		t.Fatalf("events: got %s, want %s", strings.Join(trail, ","), want)
	}
	// The store's table of disputes: a row each, in its latest state,
	// written with the payment's change.
	page, err := e.store.(surgepay.DisputeLister).ListDisputes(context.Background(),
		surgepay.DisputeQuery{MerchantID: e.merchants[0], Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, d := range page.Disputes {
		rows = append(rows, d.ID+" "+d.Status+" "+d.PaymentID+" "+strconv.FormatBool(d.DueBy.Equal(due)))
	}
	// By deadline: dp_2's first, dp_1 (none) last.
	if want := "dp_2 under_review " + id + " true,dp_1 lost " + id + " false"; strings.Join(rows, ",") != want {
		t.Fatalf("the disputes table: got %s, want %s", strings.Join(rows, ","), want)
	}
}
