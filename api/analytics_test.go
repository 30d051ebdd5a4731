package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/vault"
)

// analyticsNow is the engine's clock in the analytics tests, so that every
// change falls on one known UTC day.
var analyticsNow = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

const analyticsDay = "2026-06-15"

// newAnalyticsEnv is an env whose engine's clock is analyticsNow.
func newAnalyticsEnv(t *testing.T, store surgepay.Store) *env {
	return newEnvWith(t, store, func(c *engine.Config) { c.Now = func() time.Time { return analyticsNow } })
}

// setSetting changes one merchant's settings, keeping those in force for
// the env's two merchants.
func (e *env) setSetting(merchantID string, change func(*surgepay.MerchantSettings)) {
	set := &engine.Settings{Default: surgepay.DefaultMerchantSettings(), Merchants: map[string]surgepay.MerchantSettings{}}
	for _, m := range e.merchants {
		set.Merchants[m] = e.eng.SettingsFor(m)
	}
	s := e.eng.SettingsFor(merchantID)
	change(&s)
	set.Merchants[merchantID] = s
	e.eng.SetSettings(set)
}

func (e *env) setAnalytics(merchantID, v string) {
	e.setSetting(merchantID, func(s *surgepay.MerchantSettings) { s.Analytics = v })
}

// analyticsRow is one row of GET /v1/analytics.
type analyticsRow struct {
	Object           string `json:"object"`
	Date             string `json:"date"`
	Currency         string `json:"currency"`
	PaymentsCreated  int64  `json:"payments_created"`
	AuthorizedCount  int64  `json:"authorized_count"`
	AmountAuthorized int64  `json:"amount_authorized"`
	CapturedCount    int64  `json:"captured_count"`
	AmountCaptured   int64  `json:"amount_captured"`
	DeclinedCount    int64  `json:"declined_count"`
	FailedCount      int64  `json:"failed_count"`
	AmountFailed     int64  `json:"amount_failed"`
	VoidedCount      int64  `json:"voided_count"`
	AmountVoided     int64  `json:"amount_voided"`
	RefundedCount    int64  `json:"refunded_count"`
	AmountRefunded   int64  `json:"amount_refunded"`
}

// analytics returns the key's merchant's rows for the query string.
func (e *env) analytics(key, query string) []analyticsRow {
	e.t.Helper()
	r := e.must(200, key, "GET", "/v1/analytics?"+query, "")
	var list struct {
		Object  string         `json:"object"`
		Data    []analyticsRow `json:"data"`
		HasMore bool           `json:"has_more"`
	}
	if err := json.Unmarshal(r.Raw, &list); err != nil || list.Object != "list" || list.HasMore {
		e.t.Fatalf("GET /v1/analytics?%s: %s (%v)", query, r.Raw, err)
	}
	return list.Data
}

// analyticsOn returns the key's merchant's row of currency on analyticsDay
// (zero counters if there is none).
func (e *env) analyticsOn(key, currency string) analyticsRow {
	e.t.Helper()
	for _, r := range e.analytics(key, "from="+analyticsDay+"&to="+analyticsDay) {
		if r.Currency == currency {
			return r
		}
	}
	return analyticsRow{Object: "analytics_day", Date: analyticsDay, Currency: currency}
}

func wantRow(t *testing.T, what string, got, want analyticsRow) {
	t.Helper()
	want.Object, want.Date = "analytics_day", analyticsDay
	if got != want {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// TestAnalyticsCountsWhatWasDone runs sales from many clients at once (so
// that group commits merge their deltas), declines, a manual capture with
// partial refunds, a void and a sale in another currency: the counters
// are the exact sums, and merchant B's are its own.
func TestAnalyticsCountsWhatWasDone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newAnalyticsEnv(t, ee.store)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		_, declining := e.customerWithCard(e.keyA, "4000000000000002")
		const clients, salesEach = 8, 10
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range salesEach {
					idem := ""
					if i%2 == 0 {
						idem = fmt.Sprintf("an-%d-%d", c, i)
					}
					if r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000+int64(c), "automatic"), idem); r.Status != 200 {
						t.Errorf("sale: %d %s", r.Status, r.Raw)
					}
				}
				if r := e.do(e.keyA, "POST", "/v1/payments", paymentBody("", declining, 500, "automatic"), ""); r.Status != 402 {
					t.Errorf("decline: %d %s", r.Status, r.Raw)
				}
			}()
		}
		wg.Wait()
		auth := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 3000, "manual")).str("id")
		e.must(200, e.keyA, "POST", "/v1/payments/"+auth+"/capture", `{"amount":2000}`)
		e.must(200, e.keyA, "POST", "/v1/payments/"+auth+"/refunds", `{"amount":300}`)
		e.must(200, e.keyA, "POST", "/v1/payments/"+auth+"/refunds", `{"amount":200}`)
		voided := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 700, "manual")).str("id")
		e.must(200, e.keyA, "POST", "/v1/payments/"+voided+"/void", ``)
		// A replay changes nothing.
		e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), "an-0-0")
		e.must(200, e.keyA, "POST", "/v1/payments", `{"amount":900,"currency":"eur","payment_method":"`+pm+`"}`)
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		e.must(200, e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 4200, "automatic"))

		var salesAmount int64
		for c := range clients {
			salesAmount += salesEach * (1000 + int64(c))
		}
		sales := int64(clients * salesEach)
		wantRow(t, "merchant A usd", e.analyticsOn(e.keyA, "usd"), analyticsRow{Currency: "usd",
			PaymentsCreated: sales + clients + 2, AuthorizedCount: sales + 2, AmountAuthorized: salesAmount + 3000 + 700,
			CapturedCount: sales + 1, AmountCaptured: salesAmount + 2000, DeclinedCount: clients,
			VoidedCount: 1, AmountVoided: 700, RefundedCount: 2, AmountRefunded: 500})
		wantRow(t, "merchant A eur", e.analyticsOn(e.keyA, "eur"), analyticsRow{Currency: "eur",
			PaymentsCreated: 1, AuthorizedCount: 1, AmountAuthorized: 900, CapturedCount: 1, AmountCaptured: 900})
		if rows := e.analytics(e.keyA, "from="+analyticsDay+"&to="+analyticsDay+"&currency=EUR"); len(rows) != 1 || rows[0].Currency != "eur" {
			t.Errorf("currency=EUR: %+v", rows)
		}
		wantRow(t, "merchant B", e.analyticsOn(e.keyB, "usd"), analyticsRow{Currency: "usd",
			PaymentsCreated: 1, AuthorizedCount: 1, AmountAuthorized: 4200, CapturedCount: 1, AmountCaptured: 4200})
		if rows := e.analytics(e.keyA, "from=2026-06-16&to=2026-12-31"); len(rows) != 0 {
			t.Errorf("days without a change: %+v", rows)
		}
	})
}

// TestAnalyticsSwitch turns merchant A's analytics off while it takes
// payments: they work, A's counters stand still, B's move; turned on
// again, A's counting resumes.
func TestAnalyticsSwitch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newAnalyticsEnv(t, ee.store)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		sale := func(key, cus, pm string) {
			if r := e.do(key, "POST", "/v1/payments", paymentBody(cus, pm, 100, "automatic"), ""); r.Status != 200 {
				t.Fatalf("sale: %d %s", r.Status, r.Raw)
			}
		}
		sale(e.keyA, cus, pm)
		auth := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 500, "manual")).str("id")
		on := e.analyticsOn(e.keyA, "usd")

		e.setAnalytics(e.merchants[0], "off")
		for range 3 {
			sale(e.keyA, cus, pm)
			sale(e.keyB, cusB, pmB)
		}
		e.must(200, e.keyA, "POST", "/v1/payments/"+auth+"/capture", ``)
		if got := e.analyticsOn(e.keyA, "usd"); got != on {
			t.Errorf("analytics off, yet A's counters moved:\n got %+v\nwant %+v", got, on)
		}
		if list := e.must(200, e.keyA, "GET", "/v1/payments?limit=100", ""); strings.Count(string(list.Raw), `"object":"payment"`) != 5 {
			t.Errorf("payments stored while analytics was off: %s", list.Raw)
		}
		wantRow(t, "merchant B", e.analyticsOn(e.keyB, "usd"), analyticsRow{Currency: "usd",
			PaymentsCreated: 3, AuthorizedCount: 3, AmountAuthorized: 300, CapturedCount: 3, AmountCaptured: 300})

		e.setAnalytics(e.merchants[0], "on")
		sale(e.keyA, cus, pm)
		wantRow(t, "merchant A on again", e.analyticsOn(e.keyA, "usd"), analyticsRow{Currency: "usd",
			PaymentsCreated: 3, AuthorizedCount: 3, AmountAuthorized: 700, CapturedCount: 2, AmountCaptured: 200})
	})
}

// TestAnalyticsCaptureRaceCountsOnce captures each authorization from two
// nodes at once (two engines on one store): the loser's Write fails its
// version guard, and the counters count each capture once.
func TestAnalyticsCaptureRaceCountsOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		keys, err := vault.Generate()
		if err != nil {
			t.Fatal(err)
		}
		e := newEnvWith(t, ee.store, func(c *engine.Config) {
			c.Now, c.Vault = func() time.Time { return analyticsNow }, keys
		})
		other, err := engine.New(engine.Config{Store: ee.store, Provider: e.sim, Vault: keys,
			Now: func() time.Time { return analyticsNow }})
		if err != nil {
			t.Fatal(err)
		}
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		call := callFor(e, e.keyA)
		const n = 10
		for range n {
			id := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "manual")).str("id")
			var wg sync.WaitGroup
			for _, eng := range []*engine.Engine{e.eng, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := *call
					if _, err := eng.CapturePayment(t.Context(), &c, id, 0); err != nil && surgepay.ErrorCode(err) != surgepay.ECONFLICT {
						t.Errorf("capture: %v", err)
					}
				}()
			}
			wg.Wait()
			if fx := e.sim.Effects(id); fx.Captures != 1 {
				t.Fatalf("the network captured %d times", fx.Captures)
			}
		}
		wantRow(t, "after racing captures", e.analyticsOn(e.keyA, "usd"), analyticsRow{Currency: "usd",
			PaymentsCreated: n, AuthorizedCount: n, AmountAuthorized: n * 1000, CapturedCount: n, AmountCaptured: n * 1000})
	})
}

// TestAnalyticsStreamlined counts a streamlined sale when it is answered,
// as the API reports it (captured, its capture pending), and settlement
// confirming the capture does not count it again.
func TestAnalyticsStreamlined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newStreamlinedEnv(t, ee.store, "minimal")
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1500, "automatic"))
		today := time.Now().UTC().Format(time.DateOnly)
		query := "from=" + time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + today
		sum := func() (n analyticsRow) {
			for _, r := range e.analytics(e.keyA, query) {
				n.PaymentsCreated += r.PaymentsCreated
				n.CapturedCount += r.CapturedCount
				n.AmountCaptured += r.AmountCaptured
			}
			return n
		}
		want := analyticsRow{PaymentsCreated: 2, CapturedCount: 2, AmountCaptured: 4000}
		if got := sum(); got != want {
			t.Fatalf("after the sales: %+v, want %+v", got, want)
		}
		if rep := e.settle(t); rep.Captured != 2 {
			t.Fatalf("settle captured %d", rep.Captured)
		}
		if got := sum(); got != want {
			t.Fatalf("after settlement: %+v, want %+v", got, want)
		}
	})
}

// TestAnalyticsBadQuery: each bad parameter is a 400 naming it.
func TestAnalyticsBadQuery(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	for _, tc := range []struct{ name, query, param, code string }{
		{"ErrFromMissing", "to=2026-01-01", "from", "missing"},
		{"ErrToMissing", "from=2026-01-01", "to", "missing"},
		{"ErrFromFormat", "from=01/02/2026&to=2026-01-02", "from", "invalid_value"},
		{"ErrToNotADay", "from=2026-02-01&to=2026-02-30", "to", "invalid_value"},
		{"ErrToBeforeFrom", "from=2026-02-02&to=2026-02-01", "to", "invalid_range"},
		{"ErrRangeTooLong", "from=2025-01-01&to=2026-01-02", "to", "range_too_long"},
		{"ErrCurrency", "from=2026-01-01&to=2026-01-02&currency=zzz", "currency", "currency_unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(e.keyA, "GET", "/v1/analytics?"+tc.query, "", "")
			if r.Status != 400 || r.errField("param") != tc.param || r.errField("code") != tc.code {
				t.Errorf("got %d %s, want 400 %s %s", r.Status, r.Raw, tc.param, tc.code)
			}
		})
	}
	if r := e.do("", "GET", "/v1/analytics?from=2026-01-01&to=2026-01-01", "", ""); r.Status != 401 {
		t.Errorf("without a key: %d", r.Status)
	}
}

// TestSQLBudgetAnalytics pins the statements per request with analytics
// on (the default) and off: the counters cost one statement per request,
// the batch's single upsert counted on each request in it; off, none.
func TestSQLBudgetAnalytics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newStreamlinedEnv(t, ee.store, "minimal")
		cusA, pmA := e.customerWithCard(e.keyA, "4242424242424242") // A: streamlined
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242") // B: standard
		budget := func(what, key, method, path, body, idem, want string) {
			t.Helper()
			r := e.do(key, method, path, body, idem)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", what, r.Status, r.Raw)
			}
			if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, want+" ") {
				t.Errorf("%s: Surgepay-Sql %q, want %s", what, sql, want)
			}
		}
		r := newKeyReads(ee.store) // the read of a new Idempotency-Key
		for _, mode := range []struct{ analytics, plus string }{{"on", "1"}, {"off", "0"}} {
			for _, m := range e.merchants {
				e.setAnalytics(m, mode.analytics)
			}
			n := func(base int) string { return fmt.Sprint(base + int(mode.plus[0]-'0')) }
			label := func(s string) string { return s + " (analytics " + mode.analytics + ")" }
			budget(label("streamlined sale, minimal audit"), e.keyA, "POST", "/v1/payments",
				paymentBody(cusA, pmA, 100, "automatic"), "b-sl-"+mode.analytics, "total="+n(1+r)+" select="+fmt.Sprint(r))
			budget(label("standard sale with Idempotency-Key"), e.keyB, "POST", "/v1/payments",
				paymentBody(cusB, pmB, 100, "automatic"), "b-std-"+mode.analytics, "total="+n(2+r)+" select="+fmt.Sprint(r))
			budget(label("standard sale"), e.keyB, "POST", "/v1/payments",
				paymentBody(cusB, pmB, 100, "automatic"), "", "total="+n(2)+" select=0")
			auth := e.must(200, e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 100, "manual")).str("id")
			budget(label("capture"), e.keyB, "POST", "/v1/payments/"+auth+"/capture", "", "", "total="+n(3)+" select=1")
			budget(label("refund"), e.keyB, "POST", "/v1/payments/"+auth+"/refunds", `{"amount":10}`, "", "total="+n(3)+" select=1")
			voided := e.must(200, e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 100, "manual")).str("id")
			budget(label("void"), e.keyB, "POST", "/v1/payments/"+voided+"/void", "", "", "total="+n(3)+" select=1")
			e.setSetting(e.merchants[0], func(s *surgepay.MerchantSettings) { s.Audit = "detailed" })
			budget(label("streamlined sale, detailed audit"), e.keyA, "POST", "/v1/payments",
				paymentBody(cusA, pmA, 100, "automatic"), "", "total="+n(2)+" select=0")
			e.setSetting(e.merchants[0], func(s *surgepay.MerchantSettings) { s.Audit = "minimal" })
		}
		// Reads never count analytics.
		budget("GET /v1/analytics", e.keyA, "GET", "/v1/analytics?from=2026-01-01&to=2026-12-31", "", "", "total=1 select=1")
	})
}
