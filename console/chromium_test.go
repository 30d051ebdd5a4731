package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/internal/testenv"
)

// chromiumTimeout bounds the browser's whole visit.
const chromiumTimeout = 90 * time.Second

// TestSearchPaymentRefundInChromium: in a real headless Chromium, as an
// operator would: log in, search by the customer's email, open the
// payment, refund part of it through the confirmation, and see the
// refund on the payment's page, in its timeline and in the operators'
// actions. Screenshots of the pages go to $SURGEPAY_TEST_ARTIFACTS (or
// the test's folder).
func TestSearchPaymentRefundInChromium(t *testing.T) {
	bin := testenv.Chromium(t, "the console's browser test")
	e := newEnv(t)
	f := newFixture(t, e)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, chromiumTimeout)
	defer cancelTimeout()
	dir := os.Getenv("SURGEPAY_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.location.href + "\n" + document.body.innerText.slice(0, 3000)`))
			t.Fatalf("%s: %v\n%s", what, err, page)
		}
	}

	step("log in", chromedp.Navigate(e.base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("search")))
	step("search by email", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "zoe@example.com"),
		chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.ID("results")))
	shot("search")
	step("open the payment", chromedp.Click(chromedp.CSS(`#results a[href$="`+f.sale.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	step("ask to refund 3.00", chromedp.SendKeys(chromedp.ID("refund-amount"), "300"),
		chromedp.Click(chromedp.ID("refund")), chromedp.WaitVisible(chromedp.ID("confirm")))
	what, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("what")))
	if err != nil || !strings.Contains(what, "3.00 EUR") {
		t.Fatalf("the confirmation says %q (%v), want the refund of 3.00 EUR", what, err)
	}
	shot("confirm")
	step("confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("notice")))
	shot("payment")
	for id, want := range map[string]string{"refunded": "3.00 EUR", "status": "partially_refunded"} {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil || strings.TrimSpace(got) != want {
			t.Errorf("#%s = %q (%v), want %q", id, got, err, want)
		}
	}
	for id, want := range map[string]string{"timeline": "succeeded → partially_refunded", "audit": "console:token"} {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("#%s does not show %q: %q (%v)", id, want, got, err)
		}
	}
	// The operations views: from the navigation to the audit trail,
	// filtered by the action, and back to the payment.
	step("open the audit trail", chromedp.Click(chromedp.CSS(`#nav a[href="/console/audit"]`)),
		chromedp.WaitVisible(chromedp.ID("filter")))
	step("filter by refunds", chromedp.SetValue(chromedp.CSS(`select[name=action]`), surgepay.AuditPaymentRefunded),
		chromedp.Click(chromedp.ID("filter")), // the filtered page is the one whose option is selected by the server
		chromedp.WaitReady(chromedp.CSS(`option[value="`+surgepay.AuditPaymentRefunded+`"][selected]`)),
		chromedp.WaitVisible(chromedp.ID("audit")))
	rows, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("audit")))
	if err != nil || !strings.Contains(rows, "console:token") || !strings.Contains(rows, "amount=300") ||
		strings.Contains(rows, surgepay.AuditMerchantCreated) {
		t.Errorf("the audit trail filtered by refunds shows %q (%v), want the refund of 300 alone", rows, err)
	}
	shot("audit")
	step("back to the payment", chromedp.Click(chromedp.CSS(`#audit a[href$="`+f.sale.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("payment-id")))
	cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || strings.Contains(cookie, console.CSRFCookie) {
		t.Errorf("document.cookie = %q (%v): the CSRF cookie is readable by scripts, want HttpOnly", cookie, err)
	}
	if p := e.payment(f.sale.ID); p.AmountRefunded != 300 || p.Status != surgepay.StatusPartiallyRefunded {
		t.Fatalf("after the refund in the browser: refunded %d, %s; want 300, partially_refunded", p.AmountRefunded, p.Status)
	}
}
