package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

func TestKeysSettlement(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out, errb bytes.Buffer
	if code := cmdKeysSettlement(context.Background(), []string{"--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	pub, err := stage.LoadPublicKey(filepath.Join(dir, stage.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stage.LoadPrivateKey(filepath.Join(dir, stage.PrivateKeyFile)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), stage.KeyID(pub)) {
		t.Errorf("output lacks the key ID %s:\n%s", stage.KeyID(pub), out.String())
	}
	priv, _ := os.ReadFile(filepath.Join(dir, stage.PrivateKeyFile))
	if bytes.Contains(out.Bytes(), priv[40:60]) {
		t.Error("output shows the private key")
	}
	t.Run("ErrExists", func(t *testing.T) {
		if code := cmdKeysSettlement(context.Background(), []string{"--out", dir}, &out, &errb); code != exitSettleError {
			t.Errorf("exit %d, want %d", code, exitSettleError)
		}
	})
	t.Run("ErrNoOut", func(t *testing.T) {
		if code := cmdKeysSettlement(context.Background(), nil, &out, &errb); code != exitSettleUsage {
			t.Errorf("exit %d, want %d", code, exitSettleUsage)
		}
	})
}

// settleProviderTimeout is provider.timeout in settleSetup's config: with
// it, --ack-wait may be as short as settle.AckWaitMin of it.
const settleProviderTimeout = 2 * time.Second

// settleSetup writes keys and a config (provider: a simulator over HTTP,
// provider.timeout settleProviderTimeout) in a fresh data folder and
// stages n sales, the nth of each ten with a card whose capture is
// declined. st nil: the embedded stage.
func settleSetup(t *testing.T, n int, st surgepay.Stage) (configPath string, sales []*stagetest.Staged, p *sim.Provider) {
	t.Helper()
	dir := t.TempDir()
	if code := cmdKeysSettlement(context.Background(), []string{"--out", dir}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatal("keys settlement failed")
	}
	p = sim.New(sim.DefaultConfig())
	srv := httptest.NewServer(sim.NewHandler(p))
	t.Cleanup(srv.Close)
	configPath = filepath.Join(dir, "surgepay.toml")
	conf := "data_dir = " + quote(dir) + "\n[provider]\nkind = \"sim-http\"\nurl = " + quote(srv.URL) +
		"\ntimeout = " + quote(settleProviderTimeout.String()) + "\n"
	if err := os.WriteFile(configPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	store := openSettleStore(t, configPath)
	defer store.Close()
	pub, err := stage.LoadPublicKey(filepath.Join(dir, stage.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := stage.NewSealer(pub)
	m, err := stagetest.NewMerchant(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		card := surgepay.PAN("4242424242424242")
		if i%10 == 9 {
			card = "4000000000000259"
		}
		s, err := stagetest.MakeSale(context.Background(), store, p, sealer, st,
			stagetest.Sale{MerchantID: m.ID, Amount: int64(1000 + i), Card: card})
		if err != nil {
			t.Fatal(err)
		}
		sales = append(sales, s)
	}
	return configPath, sales, p
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func readReport(t *testing.T, path string) *settle.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep settle.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

func TestSettleCommandEmbedded(t *testing.T) {
	configPath, sales, p := settleSetup(t, 20, nil)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var out, errb bytes.Buffer
	code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--report-json", jsonPath,
		"--batch-size", "7", "--workers", "4"}, &out, &errb)
	if code != exitSettleOK {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	rep := readReport(t, jsonPath)
	if rep.Captured != 18 || rep.Failed != 2 || rep.BacklogDepth != 0 || rep.Batches < 3 {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(out.String(), "captured 18") {
		t.Errorf("text report on stdout:\n%s", out.String())
	}
	for _, s := range sales {
		if got := p.Effects(s.Payment.ID).Captures; got > 1 {
			t.Errorf("%s captured %d times", s.Payment.ID, got)
		}
	}
	// Again: nothing left, nothing captured.
	code = cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--report-json", jsonPath}, &out, &errb)
	if rep := readReport(t, jsonPath); code != exitSettleOK || rep.Captured != 0 || rep.Records != 0 {
		t.Errorf("second run: exit %d, %+v", code, rep)
	}
	if got := p.TotalEffects().Captures; got != 18 {
		t.Errorf("network captures %d, want 18", got)
	}
}

// openSettleStore opens the store of the config file at configPath, with
// no environment; the caller closes it.
func openSettleStore(t *testing.T, configPath string) surgepay.Store {
	t.Helper()
	cfg, err := config.Load(configPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// tamperFirstRecord replaces the staged record of sales[0] in the store of
// configPath with a copy whose sealed bytes have one bit flipped.
func tamperFirstRecord(t *testing.T, configPath string, sales []*stagetest.Staged) {
	t.Helper()
	store := openSettleStore(t, configPath)
	bad := *sales[0].Record
	bad.ID = surgepay.NewID("stg")
	bad.Sealed = append([]byte(nil), bad.Sealed...)
	bad.Sealed[len(bad.Sealed)-20] ^= 1
	err := store.Apply(context.Background(), &surgepay.Write{Staged: &bad, StagedAck: []string{sales[0].Record.ID}})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSettleCommandTamperedRecordLeft: a record that fails to open is
// left at the stage and an --until-empty run says so with exit status 3,
// on every run.
func TestSettleCommandTamperedRecordLeft(t *testing.T) {
	configPath, sales, p := settleSetup(t, 2, nil)
	tamperFirstRecord(t, configPath, sales)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	for i := range 2 {
		var out, errb bytes.Buffer
		code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--report-json", jsonPath}, &out, &errb)
		rep := readReport(t, jsonPath)
		if code != exitSettleLeft || rep.Failures[settle.ReasonTampered] != 1 || rep.Left != 1 || rep.BacklogDepth != 1 {
			t.Errorf("run %d: exit %d, report %+v; want exit %d, tampered 1, left 1\n%s", i, code, rep, exitSettleLeft, errb.String())
		}
		if strings.Contains(errb.String(), sales[0].Payment.ID) {
			t.Errorf("run %d: the log names the payment of a record that did not open:\n%s", i, errb.String())
		}
	}
	if got := p.Effects(sales[0].Payment.ID).Captures; got != 0 {
		t.Errorf("the payment of the tampered record captured %d times, want 0", got)
	}
	if got := p.Effects(sales[1].Payment.ID).Captures; got != 1 {
		t.Errorf("the other payment captured %d times, want 1", got)
	}
}

// settleMetricNames are the metrics docs/observability.md documents for
// `surgepay settle --metrics-listen`.
var settleMetricNames = []string{"surgepay_settle_backlog_records", "surgepay_settle_backlog_oldest_age_seconds",
	"surgepay_settle_last_batch_size", "surgepay_settle_captures_per_second", "surgepay_settle_captures_total",
	"surgepay_settle_captures_failed_total", "surgepay_settle_left_records", "surgepay_settle_failures_total"}

// metricValue returns the value of the sample line name (with its labels,
// if any) in a /metrics body, or -1 if it has none.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestSettleCommandMetrics: a continuous settle with --metrics-listen
// serves /metrics while it runs; its captures total moves from 0 to the
// report's captured count, and a tampered record shows as left and under
// its reason.
func TestSettleCommandMetrics(t *testing.T) {
	configPath, sales, _ := settleSetup(t, 20, nil)
	tamperFirstRecord(t, configPath, sales) // a card that captures: 17 captured, 2 declined
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var errb syncBuffer
	exit := make(chan int, 1)
	go func() {
		// --max-rate spreads the 19 captures over about 2 s: the scrapes
		// see the totals move.
		exit <- cmdSettle(ctx, []string{"--config", configPath, "--metrics-listen", "127.0.0.1:0", "--batch-size", "7",
			"--max-rate", "10", "--report-json", jsonPath}, io.Discard, &errb)
	}()
	addrRE := regexp.MustCompile(`"msg":"settlement metrics listening","addr":"([^"]+)"`)
	var seen []float64 // surgepay_settle_captures_total, scrape after scrape
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("settle's /metrics did not reach 17 captures and 1 record left; last:\n%s\nlog:\n%s", body, errb.String())
		}
		m := addrRE.FindStringSubmatch(errb.String())
		if m == nil {
			continue
		}
		if code, _ := get(t, "http://"+m[1]+"/metrics"); code != 401 {
			t.Fatalf("settle's /metrics without the admin token: status %d, want 401", code)
		}
		var code int
		code, body = getAuth(t, "http://"+m[1]+"/metrics", readAdminToken(t, settleDataDir(t, configPath)))
		if code != 200 {
			t.Fatalf("/metrics: status %d", code)
		}
		seen = append(seen, metricValue(t, body, "surgepay_settle_captures_total"))
		if seen[len(seen)-1] == 17 && metricValue(t, body, "surgepay_settle_left_records") == 1 &&
			metricValue(t, body, "surgepay_settle_backlog_records") == 1 {
			break
		}
	}
	cancel()
	if code := <-exit; code != exitSettleOK {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	rep := readReport(t, jsonPath)
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range settleMetricNames {
		if !strings.Contains(body, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/observability.md does not document %s", name)
		}
	}
	for name, want := range map[string]float64{"surgepay_settle_captures_total": float64(rep.Captured),
		"surgepay_settle_captures_failed_total":             float64(rep.Failed),
		`surgepay_settle_failures_total{reason="tampered"}`: float64(rep.Failures[settle.ReasonTampered]),
		`surgepay_settle_failures_total{reason="declined"}`: 2} {
		if got := metricValue(t, body, name); got != want {
			t.Errorf("%s %g, want %g (report %+v)", name, got, want, rep)
		}
	}
	if rep.Captured != 17 || rep.Failures[settle.ReasonTampered] < 1 {
		t.Errorf("report %+v; want 17 captured, the tampered record counted", rep)
	}
	if seen[0] >= 17 || !slices.IsSorted(seen) {
		t.Errorf("captures total over the scrapes %v: want it to start below 17 and never go down", seen)
	}
	if strings.Contains(body, "4242424242424242") || strings.Contains(body, "4000000000000259") {
		t.Error("/metrics holds a card number")
	}
}

// TestSettleCommandMetricsListenInUse: a --metrics-listen address taken
// stops settle before it settles anything.
func TestSettleCommandMetricsListenInUse(t *testing.T) {
	configPath, sales, p := settleSetup(t, 1, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errb bytes.Buffer
	code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--metrics-listen", ln.Addr().String()}, &out, &errb)
	if code != exitSettleError || !strings.Contains(errb.String(), "--metrics-listen") {
		t.Errorf("exit %d, want %d with the flag named:\n%s", code, exitSettleError, errb.String())
	}
	if got := p.Effects(sales[0].Payment.ID).Captures; got != 0 {
		t.Errorf("captured %d, want 0: settle should not have started", got)
	}
}

// TestSettleCommandJetStream: settle on JetStream, with --ack-wait set on
// the durable consumer and a short --orphan-grace: an orphan record (its
// sale's payment never stored) waits out its grace within the run, and is
// acknowledged.
func TestSettleCommandJetStream(t *testing.T) {
	srv := stagetest.StartNATS(t)
	js, err := jetstream.Open(context.Background(), jetstream.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	configPath, _, p := settleSetup(t, 10, js)
	orphan := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: "mer_gone", PaymentID: surgepay.NewID("pay"),
		Created: time.Now()}
	orphan.Sealed = sealFor(t, configPath, &surgepay.CaptureInstruction{PaymentID: orphan.PaymentID, MerchantID: orphan.MerchantID,
		Amount: 100, Currency: "usd", AuthorizationRef: "auth_x", IdempotencyKey: orphan.PaymentID + "/capture", Authorized: orphan.Created})
	if err := js.Put(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	ackWait := settle.AckWaitMin(settleProviderTimeout)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var out, errb bytes.Buffer
	code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--stage", "jetstream",
		"--nats-url", srv.URL, "--ack-wait", ackWait.String(), "--orphan-grace", "1s",
		"--report-json", jsonPath, "--report-text", filepath.Join(t.TempDir(), "r.txt")}, &out, &errb)
	if code != exitSettleOK {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	rep := readReport(t, jsonPath)
	if rep.Captured != 9 || rep.Failed != 1 || rep.Failures[settle.ReasonOrphan] != 1 || rep.Failures[settle.ReasonOrphanWait] == 0 ||
		rep.Left != 0 || rep.BacklogDepth != 0 {
		t.Errorf("report: %+v; want 9 captured, 1 declined, the orphan waited for and acknowledged", rep)
	}
	if got := p.TotalEffects().Captures; got != 9 {
		t.Errorf("network captures %d, want 9", got)
	}
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	njs, _ := natsjs.New(nc)
	cons, err := njs.Consumer(context.Background(), jetstream.StreamDefault, jetstream.DurableDefault)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.AckWait; got != ackWait {
		t.Errorf("consumer AckWait %s, want --ack-wait %s", got, ackWait)
	}
}

// sealFor seals ins to the settlement key of settleSetup's data folder.
func sealFor(t *testing.T, configPath string, ins *surgepay.CaptureInstruction) []byte {
	t.Helper()
	pub, err := stage.LoadPublicKey(filepath.Join(filepath.Dir(configPath), stage.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := stage.NewSealer(pub)
	sealed, err := sealer.Seal(ins)
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// TestSettleBatchIntervalDefault: settle spaces partial batches on the
// embedded stage (its results are written to the file serve writes), not
// on JetStream; a --batch-interval given wins on both.
func TestSettleBatchIntervalDefault(t *testing.T) {
	for _, c := range []struct {
		args  []string
		stage string // config stage.kind
		want  time.Duration
	}{
		{nil, "embedded", batchIntervalEmbedded},
		{nil, "jetstream", 0},
		{[]string{"--stage", "embedded"}, "jetstream", batchIntervalEmbedded},
		{[]string{"--batch-interval", "0s"}, "embedded", 0},
		{[]string{"--batch-interval", "1s"}, "jetstream", time.Second},
	} {
		o, code, ok := settleFlags(c.args, io.Discard, io.Discard)
		if !ok {
			t.Fatalf("%v: exit %d", c.args, code)
		}
		var cfg config.Config
		cfg.Stage.Kind = c.stage
		if o.fill(cfg); o.batchInterval != c.want {
			t.Errorf("%v with stage.kind %s: batch interval %v, want %v", c.args, c.stage, o.batchInterval, c.want)
		}
	}
}

func TestSettleCommandErrors(t *testing.T) {
	configPath, _, _ := settleSetup(t, 0, nil)
	inproc := filepath.Join(t.TempDir(), "inproc.toml")
	if err := os.WriteFile(inproc, []byte("data_dir = "+quote(t.TempDir())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"ErrStage", []string{"--config", configPath, "--stage", "kafka"}, exitSettleUsage},
		{"ErrBatchSize", []string{"--config", configPath, "--batch-size", "0"}, exitSettleUsage},
		{"ErrOrphanGraceShort", []string{"--config", configPath, "--orphan-grace", "10ms"}, exitSettleUsage},
		{"ErrOrphanGraceLong", []string{"--config", configPath, "--orphan-grace", "48h"}, exitSettleUsage},
		{"ErrAckWaitLong", []string{"--config", configPath, "--ack-wait", "2h"}, exitSettleUsage},
		{"ErrBatchIntervalNegative", []string{"--config", configPath, "--batch-interval", "-1s"}, exitSettleUsage},
		{"ErrBatchIntervalLong", []string{"--config", configPath, "--batch-interval", "2m"}, exitSettleUsage},
		{"ErrMetricsListenNoPort", []string{"--config", configPath, "--metrics-listen", "127.0.0.1"}, exitSettleUsage},
		{"ErrMetricsListenPortName", []string{"--config", configPath, "--metrics-listen", "127.0.0.1:http"}, exitSettleUsage},
		{"ErrMetricsListenPortRange", []string{"--config", configPath, "--metrics-listen", "127.0.0.1:65536"}, exitSettleUsage},
		{"ErrInProcessSimulator", []string{"--config", inproc, "--until-empty"}, exitSettleUsage},
		{"ErrNoPrivateKey", []string{"--config", configPath, "--until-empty", "--private-key", "/nonexistent"}, exitSettleError},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := cmdSettle(context.Background(), c.args, &out, &errb); code != c.want {
				t.Errorf("exit %d, want %d:\n%s", code, c.want, errb.String())
			}
		})
	}
	t.Run("ErrAckWaitShort", func(t *testing.T) {
		// Shorter than a batch may take: one provider call of up to
		// provider.timeout after the batch stops starting captures.
		short := settle.AckWaitMin(settleProviderTimeout) - time.Second
		var out, errb bytes.Buffer
		code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--ack-wait", short.String()}, &out, &errb)
		if code != exitSettleUsage {
			t.Errorf("exit %d, want %d:\n%s", code, exitSettleUsage, errb.String())
		}
		for _, want := range []string{"--ack-wait " + short.String() + " is too short", settleProviderTimeout.String() + " (the provider timeout)",
			"at least " + settle.AckWaitMin(settleProviderTimeout).String()} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("error lacks %q:\n%s", want, errb.String())
			}
		}
	})
}

// settleDataDir is the data folder of the configuration at path.
func settleDataDir(t *testing.T, path string) string {
	t.Helper()
	cfg, err := config.Load(path, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DataDir
}
