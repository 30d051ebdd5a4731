package api_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/internal/testenv"
)

// BenchmarkRequestAdmission measures one request through the whole API
// handler, in process (no network, no SQL): a GET that the router
// refuses after authentication (the key is cached) and a POST whose body
// is refused by decoding. It is the per-request cost of admission (key,
// merchant slot, rate-limit check, body, server slot); compare ns/op and
// allocs/op with the commit before.
func BenchmarkRequestAdmission(b *testing.B) {
	e := newEnvTB(b, testenv.OpenSQLite(b))
	h := api.New(api.Config{Engine: e.eng, BodyReadTimeout: bodyTimeoutBench})
	for _, bc := range []struct{ name, method, path, body string }{
		{"GET", "GET", "/v1/payments/not_an_id", ""},
		{"POST", "POST", "/v1/customers", `{"nme":"x"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(bc.method, bc.path, strings.NewReader(bc.body))
				req.Header.Set("Authorization", "Bearer "+e.keyA)
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code < 400 || w.Code >= 500 {
					b.Fatalf("%s %s: %d %s", bc.method, bc.path, w.Code, w.Body)
				}
			}
		})
	}
}

// bodyTimeoutBench is -1 (no body deadline) for the benchmark: on an
// httptest.ResponseRecorder http.ResponseController answers
// ErrNotSupported, wrapped by fmt.Errorf (2 allocations) that a real
// connection does not cost.
const bodyTimeoutBench = -1
