package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestWalkthrough(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		p := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "manual"))
		id := p.str("id")
		if p.str("status") != "requires_capture" || p.num("amount_capturable") != 2500 {
			t.Fatalf("after authorize: %s", p.Raw)
		}
		p = e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/capture", `{"amount":2000}`)
		if p.str("status") != "succeeded" || p.num("amount_captured") != 2000 || p.num("amount_capturable") != 0 {
			t.Fatalf("after capture: %s", p.Raw)
		}
		p = e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":500}`)
		if p.str("status") != "partially_refunded" || p.num("amount_refunded") != 500 {
			t.Fatalf("after partial refund: %s", p.Raw)
		}
		p = e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", ``)
		if p.str("status") != "refunded" || p.num("amount_refunded") != 2000 {
			t.Fatalf("after full refund: %s", p.Raw)
		}
		txs, _ := p.JSON["transactions"].([]any)
		if len(txs) != 4 {
			t.Fatalf("got %d transactions, want 4 (authorization, capture, 2 refunds): %s", len(txs), p.Raw)
		}
		ev := e.must(200, e.keyA, "GET", "/v1/payments/"+id+"/events", "")
		if data, _ := ev.JSON["data"].([]any); len(data) != 4 {
			t.Fatalf("got %d audit events, want 4: %s", len(data), ev.Raw)
		}
		got := e.must(200, e.keyA, "GET", "/v1/payments/"+id, "")
		if string(got.Raw) != string(p.Raw) {
			t.Fatalf("GET differs from the last response:\n got %s\nwant %s", got.Raw, p.Raw)
		}
		fx := e.sim.Effects(id)
		if fx.Captures != 1 || fx.AmountCaptured != 2000 || fx.Refunds != 2 || fx.AmountRefunded != 2000 {
			t.Fatalf("simulator effects %+v, want 1 capture of 2000 and 2 refunds totalling 2000", fx)
		}
	})
}

func TestIllegalTransitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		auth := func() string {
			return e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "manual")).str("id")
		}
		sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic")).str("id")
		voided := auth()
		e.must(200, e.keyA, "POST", "/v1/payments/"+voided+"/void", ``)
		declinedCus, declinedPM := e.customerWithCard(e.keyA, "4000000000000002")
		failed := e.do(e.keyA, "POST", "/v1/payments", paymentBody(declinedCus, declinedPM, 100, "automatic"), "").errField("payment")
		open := auth()
		tests := []struct {
			name, id, op, body string
			status             int
			code               string
		}{
			{"ErrOverCapture", open, "capture", `{"amount":12000}`, 422, "amount_exceeds_authorized"},
			{"ErrRefundUncaptured", open, "refunds", ``, 409, "illegal_transition"},
			{"ErrCaptureSale", sale, "capture", ``, 409, "illegal_transition"},
			{"ErrVoidSale", sale, "void", ``, 409, "illegal_transition"},
			{"ErrOverRefund", sale, "refunds", `{"amount":2501}`, 422, "amount_exceeds_refundable"},
			{"ErrCaptureVoided", voided, "capture", ``, 409, "illegal_transition"},
			{"ErrVoidVoided", voided, "void", ``, 409, "illegal_transition"},
			{"ErrRefundVoided", voided, "refunds", ``, 409, "illegal_transition"},
			{"ErrCaptureFailed", failed, "capture", ``, 409, "illegal_transition"},
			{"ErrRefundFailed", failed, "refunds", ``, 409, "illegal_transition"},
			{"ErrVoidFailed", failed, "void", ``, 409, "illegal_transition"},
			{"ErrCaptureZero", open, "capture", `{"amount":0}`, 400, "amount_too_small"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := e.must(200, e.keyA, "GET", "/v1/payments/"+tt.id, "")
				r := e.do(e.keyA, "POST", "/v1/payments/"+tt.id+"/"+tt.op, tt.body, "")
				if r.Status != tt.status || r.errField("code") != tt.code {
					t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tt.status, tt.code)
				}
				after := e.must(200, e.keyA, "GET", "/v1/payments/"+tt.id, "")
				if string(before.Raw) != string(after.Raw) {
					t.Fatalf("payment changed:\n%s\n%s", before.Raw, after.Raw)
				}
			})
		}
		// Captures and refunds add up; the network saw exactly what was stored.
		e.must(200, e.keyA, "POST", "/v1/payments/"+open+"/capture", `{"amount":1000}`)
		for _, amt := range []string{"300", "300", "400"} {
			e.must(200, e.keyA, "POST", "/v1/payments/"+open+"/refunds", `{"amount":`+amt+`}`)
		}
		p := e.must(200, e.keyA, "GET", "/v1/payments/"+open, "")
		if p.str("status") != "refunded" || p.num("amount_refunded") != 1000 {
			t.Fatalf("after refunds: %s", p.Raw)
		}
		if fx := e.sim.Effects(open); fx.AmountCaptured != 1000 || fx.AmountRefunded != 1000 {
			t.Fatalf("simulator %+v", fx)
		}
	})
}

func TestDeclines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for number, code := range map[string]string{
			"4000000000000002": "generic_decline", "4000000000009995": "insufficient_funds",
			"4000000000000069": "expired_card", "4000000000000127": "incorrect_cvc", "4000000000000119": "processing_error",
		} {
			cus, pm := e.customerWithCard(e.keyA, number)
			r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), "")
			if r.Status != 402 || r.errField("decline_code") != code || r.errField("type") != "card_error" {
				t.Fatalf("%s: got %d %s, want 402 %s", number, r.Status, r.Raw, code)
			}
			p := e.must(200, e.keyA, "GET", "/v1/payments/"+r.errField("payment"), "")
			if p.str("status") != "failed" || p.str("decline_code") != code {
				t.Fatalf("%s: stored %s", number, p.Raw)
			}
		}
	})
}

func TestIdempotency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		body := paymentBody(cus, pm, 1999, "automatic")
		first := e.do(e.keyA, "POST", "/v1/payments", body, "order-1")
		second := e.do(e.keyA, "POST", "/v1/payments", body, "order-1")
		if first.Status != 200 || second.Status != 200 || string(first.Raw) != string(second.Raw) {
			t.Fatalf("replay differs:\n%d %s\n%d %s", first.Status, first.Raw, second.Status, second.Raw)
		}
		if second.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("replay lacks Idempotent-Replayed: true")
		}
		r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2000, "automatic"), "order-1")
		if r.Status != 422 || r.errField("code") != "idempotency_key_reused" {
			t.Fatalf("mismatch: got %d %s, want 422 idempotency_key_reused", r.Status, r.Raw)
		}
		// Another merchant's key space is its own.
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		if r := e.do(e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 1999, "automatic"), "order-1"); r.Status != 200 || r.str("id") == first.str("id") {
			t.Fatalf("merchant B with the same key: %d %s", r.Status, r.Raw)
		}
		// A decline replays as the same 402.
		dc, dp := e.customerWithCard(e.keyA, "4000000000009995")
		d1 := e.do(e.keyA, "POST", "/v1/payments", paymentBody(dc, dp, 500, "automatic"), "order-2")
		d2 := e.do(e.keyA, "POST", "/v1/payments", paymentBody(dc, dp, 500, "automatic"), "order-2")
		if d1.Status != 402 || string(d1.Raw) != string(d2.Raw) {
			t.Fatalf("decline replay:\n%s\n%s", d1.Raw, d2.Raw)
		}
		// Captures and refunds replay too, with no second effect.
		auth := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 3000, "manual")).str("id")
		c1 := e.do(e.keyA, "POST", "/v1/payments/"+auth+"/capture", ``, "cap-1")
		c2 := e.do(e.keyA, "POST", "/v1/payments/"+auth+"/capture", ``, "cap-1")
		f1 := e.do(e.keyA, "POST", "/v1/payments/"+auth+"/refunds", `{"amount":100}`, "ref-1")
		f2 := e.do(e.keyA, "POST", "/v1/payments/"+auth+"/refunds", `{"amount":100}`, "ref-1")
		if c1.Status != 200 || string(c1.Raw) != string(c2.Raw) || f1.Status != 200 || string(f1.Raw) != string(f2.Raw) {
			t.Fatalf("capture/refund replays differ:\n%s\n%s\n%s\n%s", c1.Raw, c2.Raw, f1.Raw, f2.Raw)
		}
		if fx := e.sim.Effects(auth); fx.Captures != 1 || fx.Refunds != 1 || fx.AmountRefunded != 100 {
			t.Fatalf("simulator effects %+v, want 1 capture and 1 refund of 100", fx)
		}
	})
}

func TestIdempotencyConcurrentOneAuthorization(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		body := paymentBody(cus, pm, 4200, "automatic")
		const n = 50
		var wg sync.WaitGroup
		results := make([]*response, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = e.do(e.keyA, "POST", "/v1/payments", body, "same-key") }()
		}
		wg.Wait()
		var ok, inUse int
		var id string
		for _, r := range results {
			switch {
			case r.Status == 200:
				ok++
				if id != "" && r.str("id") != id {
					t.Fatalf("two payments for one key: %s and %s", id, r.str("id"))
				}
				id = r.str("id")
			case r.Status == 409 && r.errField("code") == "idempotency_key_in_use":
				inUse++
			default:
				t.Fatalf("unexpected %d %s", r.Status, r.Raw)
			}
		}
		if ok < 1 || ok+inUse != n {
			t.Fatalf("ok %d, in use %d", ok, inUse)
		}
		tot := e.sim.TotalEffects()
		if tot.Authorizations != 1 {
			t.Fatalf("simulator saw %d authorizations, want exactly 1", tot.Authorizations)
		}
		list := e.must(200, e.keyA, "GET", "/v1/payments?limit=100&customer="+cus, "")
		if data, _ := list.JSON["data"].([]any); len(data) != 1 {
			t.Fatalf("stored %d payments, want 1", len(data))
		}
	})
}

// TestPurchaseSQLBudget pins the statements a purchase issues: a sale on a
// saved card with an Idempotency-Key reads only its key (the card is
// cached; the key is read so a completed request never reaches the
// processor again, on PostgreSQL; SQLite's filter of stored keys tells a
// new key without a read) and writes 2 statements in one group commit (the idempotency record and the
// payment are one, the events one more); without the key, also 2 (the
// payment, the events). With analytics on (the default) each is one more:
// the batch's analytics upsert, counted on every request in the batch.
func TestPurchaseSQLBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		// With an Idempotency-Key, one SELECT more: the stored key is read
		// before the provider is called (engine.idempotent); none on
		// SQLite, whose filter knows the key is new.
		r := newKeyReads(e.store)
		for _, mode := range []struct{ analytics, want, wantKey string }{
			{"off", "total=2 select=0 ", sqlBudget(2+r, r)}, {"on", "total=3 select=0 ", sqlBudget(3+r, r)}} {
			e.setAnalytics(e.merchants[0], mode.analytics)
			for i := 0; i < 3; i++ {
				r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), fmt.Sprintf("budget-%s-%d", mode.analytics, i))
				if r.Status != 200 {
					t.Fatalf("purchase: %d %s", r.Status, r.Raw)
				}
				sql := r.Header.Get("Surgepay-Sql")
				if !strings.HasPrefix(sql, mode.wantKey) {
					t.Fatalf("purchase %d, analytics %s: Surgepay-Sql %q, want %s", i, mode.analytics, sql, mode.wantKey)
				}
			}
			r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), "")
			if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, mode.want) {
				t.Fatalf("purchase without Idempotency-Key, analytics %s: Surgepay-Sql %q, want %s", mode.analytics, sql, mode.want)
			}
		}
	})
}

func TestUnknownOutcomeResolvedByLookup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		// 9102: the simulator performs the sale and loses the answer.
		r := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 9102, "automatic"))
		if r.str("status") != "succeeded" {
			t.Fatalf("got %s", r.Raw)
		}
		if fx := e.sim.Effects(r.str("id")); fx.Authorizations != 1 || fx.Captures != 1 {
			t.Fatalf("simulator %+v, want one sale", fx)
		}
		// 9101: a timeout before the network: nothing happened, 503, nothing stored.
		r = e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 9101, "automatic"), "")
		if r.Status != 503 || r.Header.Get("Retry-After") == "" {
			t.Fatalf("timeout: got %d %s, want 503 with Retry-After", r.Status, r.Raw)
		}
		n, err := e.eng.ReconcileOnce(context.Background())
		if err != nil || n != 0 {
			t.Fatalf("reconcile: %d, %v", n, err)
		}
	})
}
