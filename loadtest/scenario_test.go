package loadtest

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scenarioEnv sets up count pool customers on the fake and returns an env
// that records into a fresh recorder.
func scenarioEnv(t *testing.T, f *fakeAPI, url string, declineRate float64) *env {
	t.Helper()
	cl := newClient(url, fakeAPIKey, 5*time.Second, 100, nil)
	cl.setPublishableKey(fakePublishableKey)
	t.Cleanup(cl.close)
	e := &env{cl: cl, pool: &pool{}, runID: "test", declineRate: declineRate, declineCard: testCards["card_declined"], path: "/"}
	p, err := setupPool(context.Background(), e, 10, 1)
	if err != nil {
		t.Fatalf("set-up: %v (%v)", err, f)
	}
	e.pool = p
	e.rec = newRecorder(time.Now(), DefaultLateThreshold, 1)
	f.takeLog()
	return e
}

func runScenario(e *env, name string, seed uint64) *iteration {
	it := &iteration{ctx: context.Background(), env: e, rng: rand.New(rand.NewPCG(1, seed)), index: int64(seed), next: time.Now()}
	scenarioTable[scenarioIndex(name)].run(it)
	return it
}

func TestScenarioSequences(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"checkout", []string{"POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payments"}},
		{"returning", []string{"POST /v1/payments", "POST /v1/payments/{id}/capture"}},
		{"streamlined", []string{"POST /v1/payments"}},
		{"refund", []string{"POST /v1/payments", "POST /v1/payments/{id}/refunds", "POST /v1/payments/{id}/refunds"}},
		{"browser", []string{"POST /v1/payments", "POST /v1/checkout/payment_methods", "POST /v1/checkout/payments/{id}/confirm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t)
			e := scenarioEnv(t, f, srv.URL, 0)
			it := runScenario(e, tc.name, 1)
			if diff := cmp.Diff(tc.want, f.takeLog()); diff != "" {
				t.Errorf("requests mismatch (-want +got):\n%s", diff)
			}
			if it.failed {
				t.Errorf("iteration failed: last code %q", it.lastCode)
			}
			if req, errs := e.rec.totals(); req != int64(len(tc.want)) || errs != 0 {
				t.Errorf("recorded %d requests, %d errors, want %d, 0", req, errs, len(tc.want))
			}
			if f.dupKeys+f.noKeys != 0 {
				t.Errorf("idempotency keys: %v, want each POST with a fresh key", f)
			}
		})
	}
}

// TestScenarioCRUDMix: over many iterations the read-heavy mix sends all
// five customer operations, reads most, and never fails against the fake.
func TestScenarioCRUDMix(t *testing.T) {
	f, srv := newFakeAPI(t)
	e := scenarioEnv(t, f, srv.URL, 0)
	for i := range 200 {
		if it := runScenario(e, "crud", uint64(i)); it.failed {
			t.Fatalf("iteration %d failed: %q", i, it.lastCode)
		}
	}
	counts := map[string]int{}
	for _, l := range f.takeLog() {
		counts[l]++
	}
	reads := counts["GET /v1/customers/{id}"] + counts["GET /v1/customers"]
	for _, op := range []string{"GET /v1/customers/{id}", "GET /v1/customers", "POST /v1/customers/{id}", "POST /v1/customers", "DELETE /v1/customers/{id}"} {
		if counts[op] == 0 {
			t.Errorf("no %s in %v", op, counts)
		}
	}
	if reads < 120 {
		t.Errorf("%d reads of 200 iterations, want a read-heavy mix (%v)", reads, counts)
	}
}

// TestScenarioDeclineIsExpected: a declined purchase with a decline card
// answers 402, counts as a decline and not as an error, and ends the
// iteration.
func TestScenarioDeclineIsExpected(t *testing.T) {
	f, srv := newFakeAPI(t)
	e := scenarioEnv(t, f, srv.URL, 1)
	for _, name := range []string{"checkout", "returning"} {
		it := runScenario(e, name, 3)
		if it.failed {
			t.Errorf("%s: iteration failed on an expected decline: %q", name, it.lastCode)
		}
	}
	if got := f.takeLog(); len(got) != 4 || got[3] != "POST /v1/payments" {
		t.Errorf("requests = %v, want checkout's three and returning's authorize, no capture", got)
	}
	pc, pa := e.rec.types[typePaymentCreate], e.rec.types[typePaymentAuthorize]
	if pc.declines != 1 || pa.declines != 1 || pc.errors+pa.errors != 0 || pc.status[402] != 1 {
		t.Errorf("payment.create %+v, payment.authorize %+v: want one 402 decline each and no errors", pc, pa)
	}
}

// TestScenarioBrowserDecline: a browser checkout with a decline card is
// declined at the confirm (402), which is a decline and not an error, and
// is not a sale.
func TestScenarioBrowserDecline(t *testing.T) {
	f, srv := newFakeAPI(t)
	e := scenarioEnv(t, f, srv.URL, 1)
	if it := runScenario(e, "browser", 3); it.failed {
		t.Errorf("iteration failed on an expected decline: %q", it.lastCode)
	}
	if got := f.takeLog(); len(got) != 3 {
		t.Errorf("requests = %v, want the browser's three", got)
	}
	c := e.rec.types[typeCheckoutConfirm]
	if c.declines != 1 || c.errors != 0 || c.status[402] != 1 {
		t.Errorf("checkout.confirm %+v: want one 402 decline and no errors", c)
	}
	for id, p := range f.payments {
		if p.Status != "requires_payment_method" {
			t.Errorf("payment %s is %s after a declined confirm, want requires_payment_method", id, p.Status)
		}
	}
}

// TestScenarioBrowserNeedsPublishableKey: the browser scenario without a
// publishable key, or with a secret key in its place, is a usage error
// that names the flag.
func TestScenarioBrowserNeedsPublishableKey(t *testing.T) {
	f, srv := newFakeAPI(t)
	for _, key := range []string{"", fakeAPIKey} {
		code, _, stderr := runMain(t, "--url", srv.URL, "--api-key", fakeAPIKey, "--scenario", "browser",
			"--publishable-key", key, "--rate", "10", "--duration", "1s", "--quiet")
		if code != ExitUsage || !strings.Contains(stderr, "--publishable-key") {
			t.Errorf("--publishable-key %q: exit %d, stderr %q; want %d naming --publishable-key", key, code, stderr, ExitUsage)
		}
	}
	if got := f.takeLog(); len(got) != 0 {
		t.Errorf("requests %v, want none before the flags are right", got)
	}
}

// TestScenarioCheckFails: a capture that answers 200 with the wrong status
// is a failed check and an error.
func TestScenarioCheckFails(t *testing.T) {
	f, srv := newFakeAPI(t)
	e := scenarioEnv(t, f, srv.URL, 0)
	f.captureStatus = "requires_capture"
	it := runScenario(e, "returning", 5)
	if !it.failed || it.lastCode != "check_failed" {
		t.Errorf("failed = %v, last code %q, want a failed check", it.failed, it.lastCode)
	}
	tc := e.rec.types[typePaymentCapture]
	if tc.errors != 1 || tc.codes["check_failed"] != 1 || len(tc.checks) != 1 {
		t.Errorf("payment.capture totals %+v, want one failed check", tc)
	}
	for check := range tc.checks {
		if !strings.Contains(check, `status "requires_capture", want "succeeded"`) {
			t.Errorf("check = %q, want it to name the status", check)
		}
	}
}

func TestParseMix(t *testing.T) {
	mix, err := ParseMix(strings.NewReader("[[scenario]]\nname = \"returning\"\nweight = 70\n[[scenario]]\nname = \"checkout\"\nweight = 30\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]MixEntry{{"returning", 70}, {"checkout", 30}}, mix); diff != "" {
		t.Errorf("mix mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"[[scenario]]\nname = \"nope\"\nweight = 1\n",
		"[[scenario]]\nname = \"crud\"\nweight = 0\n",
		"[[scenario]]\nname = \"crud\"\nweight = 1\nspeed = 2\n",
		"",
	} {
		if _, err := ParseMix(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMix(%q): got nil error, want one", bad)
		}
	}
}

func TestPickerWeights(t *testing.T) {
	p := newPicker([]MixEntry{{"returning", 70}, {"checkout", 30}})
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for range 10_000 {
		if p.pick(rng) == scenarioIndex("returning") {
			n++
		}
	}
	if n < 6700 || n > 7300 {
		t.Errorf("returning picked %d of 10000, want about 7000", n)
	}
}

// TestRunMixAgainstFake runs a weighted mix end to end through Main against
// the fake API: set-up, every scenario, no errors, unique idempotency keys.
func TestRunMixAgainstFake(t *testing.T) {
	f, srv := newFakeAPI(t)
	dir := t.TempDir()
	mix := filepath.Join(dir, "mix.toml")
	writeErr := os.WriteFile(mix, []byte(`
[[scenario]]
name = "returning"
weight = 40
[[scenario]]
name = "checkout"
weight = 20
[[scenario]]
name = "refund"
weight = 20
[[scenario]]
name = "crud"
weight = 10
[[scenario]]
name = "streamlined"
weight = 10
[[scenario]]
name = "browser"
weight = 10
`), 0o644)
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	out := filepath.Join(dir, "r.json")
	code, stdout, stderr := runMain(t, "--url", srv.URL, "--api-key", fakeAPIKey, "--publishable-key", fakePublishableKey, "--scenario-file", mix,
		"--rate", "80", "--duration", "1s", "--setup-customers", "20", "--decline-rate", "0.1", "--quiet", "--out", out,
		"--threshold", "errors<0.1%", "--threshold", "returning:p99<5s")
	if code != ExitOK {
		t.Fatalf("exit code = %d\n%s%s", code, stdout, stderr)
	}
	res, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"returning", "checkout", "refund", "crud", "streamlined", "browser"} {
		if res.Scenarios[name] == nil || res.Scenarios[name].Iterations == 0 {
			t.Errorf("scenario %s did not run: %+v", name, res.Scenarios)
		}
	}
	if res.Summary.Errors != 0 || res.Summary.Declines == 0 || res.Summary.Iterations != 80 {
		t.Errorf("summary %+v: want 80 iterations, some declines, no errors", res.Summary)
	}
	if f.dupKeys+f.noKeys != 0 {
		t.Errorf("idempotency keys: %v", f)
	}
	// Sales are sales (payment.create) and browser confirms, declines
	// included, but not the payments made for the browser.
	var sales, want int64
	for _, m := range res.Minutes {
		sales += m.Sales
	}
	for _, name := range []string{"payment.create", "checkout.confirm"} {
		want += res.Types[name].Requests - res.Types[name].Errors
	}
	if sales != want || res.Types["checkout.confirm"] == nil {
		t.Errorf("sales %d, want %d (payment.create and checkout.confirm)", sales, want)
	}
}

// TestAmountAvoidsSimulatorFaults draws purchase amounts: all within 5.00
// to 200.00, both ends and the neighbours of the simulator's fault amounts
// reached, and never a fault amount (9101-9105), which would make the
// simulator time out, lose an answer, refuse, decline or dispute.
func TestAmountAvoidsSimulatorFaults(t *testing.T) {
	it := &iteration{rng: rand.New(rand.NewPCG(1, 2))}
	seen := map[int64]bool{}
	for range 2_000_000 {
		a := it.amount()
		if a < 500 || a > 20_000 {
			t.Fatalf("amount %d outside 500..20000", a)
		}
		if a >= 9101 && a <= 9105 {
			t.Fatalf("amount %d is one of the simulator's fault amounts", a)
		}
		seen[a] = true
	}
	for _, a := range []int64{500, 9100, 9106, 20_000} {
		if !seen[a] {
			t.Errorf("amount %d never drawn in 2,000,000", a)
		}
	}
}
