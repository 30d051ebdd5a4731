package telemetry_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// chromiumTimeout bounds one run of the browser.
const chromiumTimeout = 90 * time.Second

// browse runs headless Chromium on url with extra flags and returns stdout.
func browse(t *testing.T, bin, url string, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,1900"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", flags, err, stderr.String())
	}
	return string(out)
}

// bodyAttr returns the value of a data attribute of <body> in dom.
func bodyAttr(t *testing.T, dom, name string) string {
	t.Helper()
	body := regexp.MustCompile(`<body[^>]*>`).FindString(dom)
	m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("<body> has no %s: %q", name, body)
	}
	return m[1]
}

func TestDashboardInChromium(t *testing.T) {
	bin := testenv.Chromium(t, "the dashboard test")
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	cus := jsonField(e.Do(t, "POST", "/v1/customers", `{"name":"Dash"}`).Body, "id")
	pm := jsonField(e.Do(t, "POST", "/v1/payment_methods", `{"customer":"`+cus+
		`","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040}}`).Body, "id")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // traffic while the browser watches
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			body := `{"amount":1000,"currency":"usd","payment_method":"` + pm + `"}`
			if i%5 == 0 {
				body = `{"amount":-1}`
			}
			e.Do(t, "POST", "/v1/payments", body)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { stop(); wg.Wait() }()
	time.Sleep(2500 * time.Millisecond) // a few samples to chart

	url := e.Admin + "/dashboard"
	dom1 := browse(t, bin, url, "--virtual-time-budget=3000", "--dump-dom")
	if got := bodyAttr(t, dom1, "data-rendered"); got != "true" {
		t.Fatalf("data-rendered: got %q, want true\n%s", got, dom1)
	}
	if n := strings.Count(dom1, "<canvas"); n < 8 {
		t.Errorf("got %d canvas elements, want 8 charts", n)
	}
	// The time axis: each label the clock time alone on one line (uPlot's
	// default put the date under the first, overlapping the next label).
	labels := strings.Fields(bodyAttr(t, dom1, "data-x-labels"))
	if len(labels) == 0 {
		t.Errorf("data-x-labels: no time-axis labels drawn")
	}
	for _, l := range labels {
		if !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(l) {
			t.Errorf("time-axis label %q: want HH:MM:SS alone (labels %q)", l, labels)
		}
	}
	if u, _ := strconv.Atoi(bodyAttr(t, dom1, "data-updates")); u < 2 {
		t.Errorf("data-updates: got %d, want the page to poll at least twice in 3 s of virtual time", u)
	}
	time.Sleep(2 * time.Second)
	dom2 := browse(t, bin, url, "--virtual-time-budget=2000", "--dump-dom")
	seq1, _ := strconv.Atoi(bodyAttr(t, dom1, "data-seq"))
	seq2, _ := strconv.Atoi(bodyAttr(t, dom2, "data-seq"))
	if seq2 <= seq1 || seq1 < 2 {
		t.Errorf("data-seq: got %d then %d, want the charts to move", seq1, seq2)
	}
	if !regexp.MustCompile(`id="k-rps">[0-9.]+<`).MatchString(dom2) {
		t.Errorf("the throughput figure is not a number: %s", regexp.MustCompile(`id="k-rps">[^<]*<`).FindString(dom2))
	}

	dir := os.Getenv("SURGEPAY_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "dashboard.png")
	browse(t, bin, url, "--virtual-time-budget=3000", "--hide-scrollbars", "--screenshot="+shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, fi.Size())
	}
	t.Logf("screenshot: %s", shot)
}
