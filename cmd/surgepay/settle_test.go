package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
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

// settleSetup writes keys and a config (provider: a simulator over HTTP)
// in a fresh data folder and stages n sales, the nth of each ten with a
// card whose capture is declined. st nil: the embedded stage.
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
	conf := "data_dir = " + quote(dir) + "\n[provider]\nkind = \"sim-http\"\nurl = " + quote(srv.URL) + "\n"
	if err := os.WriteFile(configPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(configPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
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

func TestSettleCommandJetStream(t *testing.T) {
	srv := stagetest.StartNATS(t)
	js, err := jetstream.Open(context.Background(), jetstream.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	configPath, _, p := settleSetup(t, 10, js)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var out, errb bytes.Buffer
	code := cmdSettle(context.Background(), []string{"--config", configPath, "--until-empty", "--stage", "jetstream",
		"--nats-url", srv.URL, "--report-json", jsonPath, "--report-text", filepath.Join(t.TempDir(), "r.txt")}, &out, &errb)
	if code != exitSettleOK {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	if rep := readReport(t, jsonPath); rep.Captured != 9 || rep.Failed != 1 || rep.BacklogDepth != 0 {
		t.Errorf("report: %+v", rep)
	}
	if got := p.TotalEffects().Captures; got != 9 {
		t.Errorf("network captures %d, want 9", got)
	}
}

func TestSettleCommandErrors(t *testing.T) {
	configPath, _, _ := settleSetup(t, 0, nil)
	inproc := filepath.Join(t.TempDir(), "inproc.toml")
	os.WriteFile(inproc, []byte("data_dir = "+quote(t.TempDir())+"\n"), 0o600)
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"ErrStage", []string{"--config", configPath, "--stage", "kafka"}, exitSettleUsage},
		{"ErrBatchSize", []string{"--config", configPath, "--batch-size", "0"}, exitSettleUsage},
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
}
