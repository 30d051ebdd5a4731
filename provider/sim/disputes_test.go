package sim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

// TestDisputeEventDeadline: the simulator's dispute of a sale of
// AmountDisputed carries its deadline, DisputeResponseWindow after it was
// filed (to the second, as Stripe's due_by), and ParseEvent reads it.
func TestDisputeEventDeadline(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	got := make(chan *surgepay.ProcessorEvent, 1)
	p.OnEvent(func(_ context.Context, payload []byte, header http.Header) bool {
		ev, err := p.ParseEvent("default", payload, header)
		if err != nil {
			t.Errorf("ParseEvent: %v", err)
		}
		got <- ev
		return false
	})
	before := time.Now().Truncate(time.Second)
	if _, err := p.Authorize(t.Context(), authReq("disputed", visa, sim.AmountDisputed, true)); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	var ev *surgepay.ProcessorEvent
	select {
	case ev = <-got:
	case <-t.Context().Done():
		t.Fatal("no dispute event")
	}
	if ev == nil || ev.Kind != surgepay.ProcessorEventDisputeCreated || ev.Status != surgepay.DisputeNeedsResponse {
		t.Fatalf("got %+v, want a dispute needing a response", ev)
	}
	lo, hi := before.Add(sim.DisputeResponseWindow), after.Add(sim.DisputeResponseWindow)
	if ev.DueBy.Before(lo) || ev.DueBy.After(hi) || ev.DueBy.Location() != time.UTC {
		t.Fatalf("due by %v, want between %v and %v (filed + %v), in UTC", ev.DueBy, lo, hi, sim.DisputeResponseWindow)
	}
}
