package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BrowserTimeout bounds a browser's whole visit in a test.
const BrowserTimeout = 90 * time.Second

// Browser is a headless Chromium visiting pages for a test, as a person
// would (the console's operator, the checkout's shopper). Screenshots go
// to $SURGEPAY_TEST_ARTIFACTS (or the test's folder), named Prefix+NAME.png.
// Each package's tests wrap it with the helpers of their pages.
type Browser struct {
	T      *testing.T
	Ctx    context.Context
	Dir    string
	Prefix string
}

// NewBrowser starts Chromium for the test with a window of width×height
// (skipped without Chromium outside CI, failed in CI: Chromium names
// what needs it), stopped when the test ends.
func NewBrowser(t *testing.T, what, prefix string, width, height int) *Browser {
	t.Helper()
	bin := Chromium(t, what)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, BrowserTimeout)
	t.Cleanup(cancelTimeout)
	dir := os.Getenv("SURGEPAY_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	return &Browser{T: t, Ctx: ctx, Dir: dir, Prefix: prefix}
}

// Shot saves a screenshot of the whole page as Prefix+name.png.
func (b *Browser) Shot(name string) {
	b.T.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.T.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, b.Prefix+name+".png"), png, 0o600); err != nil {
		b.T.Fatal(err)
	}
}

// Step runs actions, failing the test with the page's address and text
// if one fails.
func (b *Browser) Step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	if err := chromedp.Do(b.Ctx, actions...); err != nil {
		b.T.Fatalf("%s: %v\n%s", what, err, b.Page())
	}
}

// Page is the page's address and the start of its text, for a failure.
func (b *Browser) Page() string {
	page, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.location.href + "\n" + document.body.innerText.slice(0, 3000)`))
	return page
}
