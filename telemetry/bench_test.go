package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// discardExporter drops spans after the processor has batched them.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkMiddleware measures the API handler in process (no network) on a
// read served from the cache (GET /v1/payment_methods/{id}: no SQL), so the
// middleware's share is as large as it gets, and on a sale (POST
// /v1/payments: provider call and a group commit), with telemetry off,
// with metrics and access logs (the default), and with tracing at 100%.
//
//	go test -run '^$' -bench Middleware -benchmem ./telemetry/
func BenchmarkMiddleware(b *testing.B) {
	off := telemetry.Config{}
	metrics := telemetry.DefaultConfig()
	metrics.AccessLog = false
	logs := telemetry.Config{AccessLog: true}
	tracing := telemetry.DefaultConfig()
	tracing.Tracing.Enabled, tracing.Tracing.SampleRatio = true, 1
	for _, v := range []struct {
		name string
		cfg  telemetry.Config
	}{{"off", off}, {"metrics", metrics}, {"logs", logs}, {"metrics+logs", telemetry.DefaultConfig()},
		{"tracing100", tracing}} {
		e := telemetrytest.Start(b, telemetrytest.Options{Telemetry: v.cfg, LogWriter: io.Discard, Exporter: discardExporter{}})
		cus := jsonField(e.Do(b, "POST", "/v1/customers", `{"name":"Bench"}`).Body, "id")
		pm := jsonField(e.Do(b, "POST", "/v1/payment_methods", `{"customer":"`+cus+
			`","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040}}`).Body, "id")
		b.Run("get/"+v.name, func(b *testing.B) {
			serve(b, e, "GET", "/v1/payment_methods/"+pm, "")
		})
		b.Run("sale/"+v.name, func(b *testing.B) {
			serve(b, e, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+`"}`)
		})
	}
}

func serve(b *testing.B, e *telemetrytest.Env, method, path, body string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.Key)
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			e.Handler.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%s %s: status %d: %s", method, path, w.Code, w.Body)
			}
		}
	})
}
