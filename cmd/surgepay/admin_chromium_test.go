package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/internal/testenv"
)

// chromiumLoginTimeout bounds the browser's whole visit.
const chromiumLoginTimeout = 90 * time.Second

// TestDashboardLoginInChromium: in a real headless Chromium, the
// dashboard of a running serve sends a visitor without a credential to
// the login page; the admin token typed there opens the dashboard, whose
// charts render and poll their data with the session cookie, which the
// page's scripts cannot read (HttpOnly).
func TestDashboardLoginInChromium(t *testing.T) {
	bin := testenv.Chromium(t, "the dashboard login test")
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	startServe(t, cfg)
	token := readAdminToken(t, dir)
	base := "http://" + cfg.AdminListen

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, chromiumLoginTimeout)
	defer cancelTimeout()

	err := chromedp.Do(ctx, chromedp.Navigate(base+"/dashboard"), chromedp.WaitVisible(chromedp.ID("token")))
	if err != nil {
		t.Fatalf("open /dashboard: %v", err)
	}
	loginURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasSuffix(loginURL, "/login?next=%2Fdashboard") {
		t.Fatalf("without a credential the browser is at %s (%v), want the login page", loginURL, err)
	}
	// The login answers 303 to /dashboard: wait for its throughput figure
	// (queries follow the navigation; an evaluation during it fails).
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("k-rps")))
	if err != nil {
		t.Fatalf("log in: %v", err)
	}
	// The page sets data-rendered once its charts are drawn and counts
	// its polls of /dashboard/data in data-updates.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.location.pathname === "/dashboard" &&
		document.body.dataset.rendered === "true" && Number(document.body.dataset.updates) >= 2`,
		chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		dom, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.location.href + "\n" + document.body.outerHTML.slice(0, 2000)`))
		t.Fatalf("the dashboard did not render and poll after the login: %v\n%s", err, dom)
	}
	cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cookie, admin.SessionCookie) {
		t.Errorf("document.cookie = %q: the session cookie is readable by scripts, want HttpOnly", cookie)
	}
}
