package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// Card numbers used only by this test, so a find means a leak.
var cards = []struct{ number, cvc string }{
	{"4111111111111111", "731"},
	{"5105105105105100", "842"},
	{"4000000000009995", "953"}, // declined: insufficient funds
	{"4000000000000002", "164"}, // declined
	{"378734493671000", "2751"}, // amex
}

// panicAmount makes panicky's Authorize panic with the card number in the
// panic value.
const panicAmount = 6666

type panicky struct{ surgepay.Provider }

func (p panicky) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	if req.Amount == panicAmount {
		panic(fmt.Errorf("provider exploded charging card %s cvc %s", string(req.Card.Number), req.Card.CVC.Value()))
	}
	return p.Provider.Authorize(ctx, req)
}

func fullTelemetry() telemetry.Config {
	c := telemetry.DefaultConfig()
	c.Tracing.Enabled = true
	c.Tracing.SampleRatio = 1
	return c
}

func TestCardDataNeverInTelemetry(t *testing.T) {
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: fullTelemetry(),
		Provider: func(p surgepay.Provider) surgepay.Provider { return panicky{p} }})
	panics := 0
	var headers strings.Builder
	for _, c := range cards {
		panics += cardTraffic(t, e, c.number, c.cvc, &headers)
	}
	if panics == 0 {
		t.Fatal("no request reached the panicking provider")
	}
	if err := e.Tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	metrics := telemetrytest.Get(t, e.Admin+"/metrics")
	logs := e.Logs.String()
	spans := spanText(e)
	for _, want := range []string{"panic serving request", `"trace_id"`, `"merchant"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s; did the traffic run?", want)
		}
	}
	for _, want := range []string{"provider.authorize", "store.Apply", "POST /v1/payments"} {
		if !strings.Contains(spans, want) {
			t.Errorf("spans lack %q; did tracing run?", want)
		}
	}
	if !strings.Contains(metrics, "surgepay_payments_total") {
		t.Error("metrics lack surgepay_payments_total")
	}
	if !strings.Contains(headers.String(), "Trace-Id: ") {
		t.Error("responses lack Trace-Id; did tracing run?")
	}
	for name, text := range map[string]string{"logs": logs, "metrics": metrics, "spans": spans, "response headers": headers.String()} {
		if l := leaks(text); len(l) > 0 {
			t.Errorf("%s (%d bytes) contain %v", name, len(text), l)
		}
	}
	if !strings.Contains(metrics, "surgepay_telemetry_spans_redacted_total 0") {
		t.Error("exported spans needed redaction: some span attribute held a card-number-like value")
	}
}

// cardTraffic sends a card through every route that takes one, through the
// error paths and the panic path, and returns how many requests panicked.
func cardTraffic(t *testing.T, e *telemetrytest.Env, number, cvc string, headers *strings.Builder) (panics int) {
	cus := jsonField(e.Do(t, "POST", "/v1/customers", `{"name":"Scan"}`).Body, "id")
	card := `{"number":"` + number + `","exp_month":12,"exp_year":2031,"cvc":"` + cvc + `"}`
	bad := number[:len(number)-1] + "9" // fails Luhn
	for _, b := range []string{
		`{"customer":"` + cus + `","card":` + card + `,"extra":"` + number + `"}`, // unknown field
		`{"customer":"` + cus + `","card":{"number":` + number + `}}`,             // wrong type
		`{"customer":"` + cus + `","card":{"number":"` + bad + `","exp_month":12,"exp_year":2031}}`,
		`{"customer":"` + cus + `","card":` + strings.Replace(card, "2031", "2019", 1) + `}`, // expired
		`{"customer":"cus_missing","card":` + card + `}`,
		`{"customer":"` + cus + `","card":{"number":"` + number + `"`, // truncated
		`{"` + number + `":1}`,
		`not json ` + number,
	} {
		e.Do(t, "POST", "/v1/payment_methods", b)
	}
	pm := jsonField(e.Do(t, "POST", "/v1/payment_methods", `{"customer":"`+cus+`","card":`+card+`}`).Body, "id")
	for _, capture := range []string{"automatic", "manual"} {
		r := e.Do(t, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+
			`","capture_method":"`+capture+`","cvc":"`+cvc+`"}`, "Idempotency-Key: k-"+cvc+capture)
		if id := jsonField(r.Body, "id"); id != "" && capture == "manual" {
			e.Do(t, "POST", "/v1/payments/"+id+"/capture", `{"amount":`+number+`}`)
			e.Do(t, "POST", "/v1/payments/"+id+"/capture", ``)
			e.Do(t, "POST", "/v1/payments/"+id+"/refunds", `{"amount":100}`)
			e.Do(t, "GET", "/v1/payments/"+id+"/events", ``)
		}
	}
	r := e.Do(t, "POST", "/v1/payments", `{"amount":`+fmt.Sprint(panicAmount)+`,"currency":"usd","payment_method":"`+pm+
		`","cvc":"`+cvc+`"}`)
	if r.Status == http.StatusInternalServerError {
		panics++
	}
	// Card numbers where no card number belongs: path, query, headers.
	e.Do(t, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+number+`"}`)
	e.Do(t, "GET", "/v1/payment_methods/"+number, ``)
	e.Do(t, "GET", "/v1/payment_methods?customer="+number, ``)
	e.Do(t, "GET", "/v1/no/such/route/"+number, ``)
	e.Do(t, "GET", "/v1/payments?limit="+number, ``)
	e.Do(t, "GET", "/v1/customers/"+cus, ``, "X-Request-Id: "+number, "Traceparent: 00-"+number+number+"0-"+number+"-01")
	// Well-formed traceparents and request IDs that carry the number, in
	// the trace ID (inside a longer digit run, or between hex letters),
	// in the parent span ID, and grouped by separators Redact missed
	// ('.', '_', '/'): before, each reached the Trace-Id or X-Request-Id
	// header and the access log.
	pad := func(s string, n int, c string) string { return s + strings.Repeat(c, n-len(s)) }
	for _, h := range [][]string{
		{"Traceparent: 00-" + pad(number, 32, "0") + "-00f067aa0ba902b7-01"},
		{"Traceparent: 00-" + pad("ab"+number, 32, "c") + "-00f067aa0ba902b7-01"},
		{"Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-" + pad(number, 16, "0") + "-01"},
		{"Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Tracestate: card=" + number},
		{"X-Request-Id: " + group(number, ".")},
		{"X-Request-Id: " + group(number, "_")},
		{"X-Request-Id: " + group(number, "/")},
		{"X-Request-Id: req-" + number + "0000"},
	} {
		r := e.Do(t, "GET", "/v1/customers/"+cus, ``, h...)
		for _, k := range []string{"Trace-Id", "X-Request-Id"} {
			fmt.Fprintf(headers, "%s: %s\n", k, r.Header.Get(k))
		}
	}
	e.Do(t, number, "/v1/customers", ``)
	e.Do(t, "POST", "/v1/customers", `{"name":"`+number+`"}`, "Idempotency-Key: "+number)
	return panics
}

// spanText renders every exported span: names, attributes, events, status.
func spanText(e *telemetrytest.Env) string {
	var b strings.Builder
	kv := func(as []attribute.KeyValue) {
		for _, a := range as {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
	}
	for _, s := range e.Spans.GetSpans() {
		fmt.Fprintf(&b, "%s status=%s %q", s.Name, s.Status.Code, s.Status.Description)
		kv(s.Attributes)
		for _, ev := range s.Events {
			b.WriteString(" event:" + ev.Name)
			kv(ev.Attributes)
		}
		for _, l := range s.Links {
			kv(l.Attributes)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// group writes a number in groups of four joined by sep.
func group(number, sep string) string {
	var parts []string
	for i := 0; i < len(number); i += 4 {
		parts = append(parts, number[i:min(i+4, len(number))])
	}
	return strings.Join(parts, sep)
}

// leaks returns the card numbers and CVCs found in text, plain or with
// separators between their digits.
func leaks(text string) []string {
	var found []string
	for _, c := range cards {
		for _, n := range []string{c.number, c.number[:len(c.number)-1] + "9"} {
			if regexp.MustCompile(strings.Join(strings.Split(n, ""), `[ ._/-]?`)).MatchString(text) {
				found = append(found, "PAN "+c.number)
				break
			}
		}
		if regexp.MustCompile(`(?i)cvc\W{0,4}` + c.cvc).MatchString(text) {
			found = append(found, "CVC "+c.cvc)
		}
	}
	return found
}

var idField = regexp.MustCompile(`"id"\s*:\s*"([^"]+)"`)

func jsonField(body, _ string) string {
	if m := idField.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}
