package loadtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reportCharts is how many charts a non-stress report draws.
const reportCharts = 12 // 7 per window, 5 per minute (the writer's with --server-metrics)

// remoteRef finds a resource reference that leaves the file: an src or href
// attribute, a CSS url() or an @import naming http(s) or a
// protocol-relative URL.
var remoteRef = regexp.MustCompile(`(?i)((src|href)\s*=\s*["']?\s*|url\(\s*["']?\s*|@import\s+["']?\s*)(https?:|//)`)

// writeSampleReport runs a short "get" run and writes its HTML report,
// with the server's writer gauges scraped from a /metrics beside it.
func writeSampleReport(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			_, _ = io.WriteString(w, "surgepay_groupcommit_stall_seconds 0.25\nsurgepay_groupcommit_queue_depth 3\n"+
				`surgepay_http_requests_shed_total{reason="overloaded"} 0`+"\n")
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	html := filepath.Join(t.TempDir(), "report.html")
	code, stdout, stderr := runMain(t, "--url", srv.URL, "--scenario", "get", "--rate", "50", "--duration", "2s",
		"--quiet", "--html", html, "--server-pid", strconv.Itoa(os.Getpid()), "--server-metrics", srv.URL+"/metrics")
	if code != ExitOK {
		t.Fatalf("exit code = %d\n%s%s", code, stdout, stderr)
	}
	return html
}

func TestReportSelfContained(t *testing.T) {
	b, err := os.ReadFile(writeSampleReport(t))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if m := remoteRef.FindString(page); m != "" {
		t.Errorf("report references a remote resource: %q", m)
	}
	for _, want := range []string{"<!DOCTYPE html>", "var uPlot=", ".uplot", `id="result-data"`, "</html>"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Count(page, "<script") != strings.Count(page, "</script>") {
		t.Errorf("report has unbalanced script elements")
	}
}

func TestRemoteRefPattern(t *testing.T) {
	for _, bad := range []string{`<img src="https://x/y.png">`, `<link href='//cdn/x.css'>`, `background:url( "http://x/a.png")`, `@import "https://x.css"`} {
		if !remoteRef.MatchString(bad) {
			t.Errorf("pattern misses %q", bad)
		}
	}
	if remoteRef.MatchString(`<a name="x">/*! https://github.com/leeoniya/uPlot */`) {
		t.Errorf("pattern flags a comment")
	}
}

// TestReportRendersInChromium opens the report in headless Chromium and
// checks the script drew its charts on canvases.
func TestReportRendersInChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing and CI is set", chromium)
		}
		t.Skipf("%s missing", chromium)
	}
	html := writeSampleReport(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--window-size=1200,2000",
		"--dump-dom", "file://"+html)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	m := regexp.MustCompile(`data-rendered="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("dumped DOM has no data-rendered attribute; the report script did not finish:\n%.2000s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n != reportCharts {
		t.Errorf("rendered %d charts, want %d", n, reportCharts)
	}
	if n := strings.Count(dom, "<canvas"); n < reportCharts {
		t.Errorf("DOM has %d canvas elements, want at least %d", n, reportCharts)
	}
	if !strings.Contains(dom, "<td>get</td>") {
		t.Errorf("DOM lacks the request type table row for get")
	}
}
