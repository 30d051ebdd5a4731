package api

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/enginetest"
)

// The tests in this file keep api/openapi.json in step with the router and
// with the JSON types of types.go and json.go.

// openAPIDoc parses the embedded document.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// object walks doc along keys, failing the test if a step is not an object.
func object(t *testing.T, doc map[string]any, keys ...string) map[string]any {
	t.Helper()
	cur := doc
	for i, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			t.Fatalf("openapi.json: %s is not an object", strings.Join(keys[:i+1], "."))
		}
		cur = next
	}
	return cur
}

func TestOpenAPIDocument(t *testing.T) {
	doc := openAPIDoc(t)
	v, _ := doc["openapi"].(string)
	if !strings.HasPrefix(v, "3.0.") {
		t.Errorf("openapi = %q, want 3.0.x", v)
	}
	info := object(t, doc, "info")
	if info["title"] != "surgepay" || info["version"] != "1.0.0" {
		t.Errorf("info title/version = %v/%v, want surgepay/1.0.0", info["title"], info["version"])
	}
	if _, ok := object(t, doc, "components", "securitySchemes")["bearerAuth"]; !ok {
		t.Error("components.securitySchemes.bearerAuth is missing")
	}
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// unauthenticatedRoutes are served by the mux directly, not through Routes().
var unauthenticatedRoutes = []string{"GET /v1/openapi.json", "GET /healthz", "GET /readyz",
	processorWebhookRoute}

// processorWebhookRoute is the processors' own: signed by the processor,
// with no API key, no Idempotency-Key (each event id is applied once) and
// none of the merchant API's conflicts.
const processorWebhookRoute = "POST /v1/processor_webhooks/{processor}"

// specOperations returns the document's operations by "METHOD /path".
func specOperations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	ops := map[string]map[string]any{}
	for path, item := range object(t, doc, "paths") {
		item, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("paths[%q] is not an object", path)
		}
		for _, m := range httpMethods {
			if o, ok := item[m].(map[string]any); ok {
				ops[strings.ToUpper(m)+" "+path] = o
			}
		}
	}
	return ops
}

func TestOpenAPIRoutesMatchRouter(t *testing.T) {
	doc := openAPIDoc(t)
	spec := map[string]bool{}
	for k := range specOperations(t, doc) {
		spec[k] = true
	}
	code := map[string]bool{}
	for _, r := range New(Config{}).Routes() {
		code[r] = true
	}
	for _, r := range unauthenticatedRoutes {
		code[r] = true
	}
	var notInSpec, notInRouter []string
	for r := range code {
		if !spec[r] {
			notInSpec = append(notInSpec, r)
		}
	}
	for r := range spec {
		if !code[r] {
			notInRouter = append(notInRouter, r)
		}
	}
	sort.Strings(notInSpec)
	sort.Strings(notInRouter)
	if len(notInSpec) > 0 {
		t.Errorf("routes missing from openapi.json:\n  %s", strings.Join(notInSpec, "\n  "))
	}
	if len(notInRouter) > 0 {
		t.Errorf("operations in openapi.json that the router does not serve:\n  %s", strings.Join(notInRouter, "\n  "))
	}
}

// TestOpenAPIOperations checks the cross-cutting parts every operation must
// document: security, Idempotency-Key, path parameters and error statuses.
func TestOpenAPIOperations(t *testing.T) {
	doc := openAPIDoc(t)
	if sec, ok := doc["security"].([]any); !ok || len(sec) == 0 {
		t.Error("no global security requirement")
	}
	const idemRef = "#/components/parameters/Idempotency-Key"
	for key, o := range specOperations(t, doc) {
		method, path, _ := strings.Cut(key, " ")
		unauth := slices.Contains(unauthenticatedRoutes, key)
		sec, hasSec := o["security"].([]any)
		if unauth && (!hasSec || len(sec) != 0) {
			t.Errorf("%s: unauthenticated route must have security: []", key)
		}
		if !unauth && hasSec {
			t.Errorf("%s: authenticated route must use the global security", key)
		}
		var refs []string
		pathParams := map[string]bool{}
		params, _ := o["parameters"].([]any)
		for _, p := range params {
			p, _ := p.(map[string]any)
			if ref, ok := p["$ref"].(string); ok {
				refs = append(refs, ref)
				if target, ok := resolveRef(doc, ref).(map[string]any); ok && target["in"] == "path" {
					pathParams[target["name"].(string)] = true
				}
			}
		}
		idem := slices.Contains(refs, idemRef)
		if (method == "POST" || method == "DELETE") != idem && key != processorWebhookRoute {
			t.Errorf("%s: Idempotency-Key parameter present = %v, want it exactly on POST and DELETE", key, idem)
		}
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") && !pathParams[strings.Trim(seg, "{}")] {
				t.Errorf("%s: path parameter %s is not declared", key, seg)
			}
		}
		resp, _ := o["responses"].(map[string]any)
		want := []string{"200", "503"}
		if !unauth {
			// Every authenticated route passes the merchant's rate limit.
			want = append(want, "401", "429", "500")
		}
		if (method == "POST" || method == "DELETE") && key != processorWebhookRoute {
			want = append(want, "400", "409", "415", "422")
		}
		for _, code := range want {
			if _, ok := resp[code]; !ok {
				t.Errorf("%s: response %s is not documented", key, code)
			}
		}
		const rateLimitedRef = "#/components/responses/RateLimited"
		// The processors' webhooks have no rate limit but a share of the
		// in-flight requests (merchant_concurrency_limit): their own 429.
		if r, ok := resp["429"].(map[string]any); ok && key != processorWebhookRoute && r["$ref"] != rateLimitedRef {
			t.Errorf("%s: response 429 is %v, want $ref %s", key, r["$ref"], rateLimitedRef)
		}
		if _, ok := resp["429"]; ok && unauth && key != processorWebhookRoute {
			t.Errorf("%s: response 429 is documented, but the rate limit does not apply to this route", key)
		}
		if _, ok := resp["429"]; !ok && key == processorWebhookRoute {
			t.Errorf("%s: response 429 (merchant_concurrency_limit) is not documented", key)
		}
	}
}

// TestOpenAPIRateLimited checks the documented 429 against what the
// server sends: the example is the body of a real refusal (rate 50,
// burst 200), and Retry-After is a required integer of at least 1.
func TestOpenAPIRateLimited(t *testing.T) {
	doc := openAPIDoc(t)
	rl := object(t, doc, "components", "responses", "RateLimited")
	ra := object(t, rl, "headers", "Retry-After")
	if ra["required"] != true {
		t.Error("RateLimited: header Retry-After must be required (the server always sends it)")
	}
	if s := object(t, ra, "schema"); s["type"] != "integer" || s["minimum"] != 1.0 {
		t.Errorf("RateLimited: Retry-After schema = %v, want integer, minimum 1", s)
	}
	example := object(t, rl, "content", "application/json", "examples", "rate_limited", "value")

	limited := surgepay.DefaultMerchantSettings()
	limited.RateLimit, limited.RateBurst = 50, 200
	eng := enginetest.SQLite(t, &engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{"mer_limited": limited}})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(Config{Engine: eng, Now: func() time.Time { return now }})
	for range 200 {
		if err := s.rateLimit(context.Background(), "mer_limited"); err != nil {
			t.Fatalf("a request within the burst: %v", err)
		}
	}
	refusal := s.rateLimit(context.Background(), "mer_limited")
	if refusal == nil {
		t.Fatal("the request after the burst was admitted")
	}
	status, body := render(nil, refusal)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusTooManyRequests || !reflect.DeepEqual(got, example) {
		t.Errorf("the server refuses with %d %s\nthe RateLimited example is %v", status, body, example)
	}
}

// resolveRef returns the value a local "#/..." reference points at, or nil.
func resolveRef(doc map[string]any, ref string) any {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, tok := range strings.Split(frag, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[tok]; !ok {
			return nil
		}
	}
	return cur
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := openAPIDoc(t)
	n := 0
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				n++
				if resolveRef(doc, ref) == nil {
					t.Errorf("%s: $ref %q does not resolve inside the document", at, ref)
				}
			}
			for k, c := range x {
				walk(c, at+"/"+k)
			}
		case []any:
			for _, c := range x {
				walk(c, at+"/[]")
			}
		}
	}
	walk(doc, "#")
	if n == 0 {
		t.Error("the document has no $ref at all")
	}
}

// jsonFields returns the JSON names of a struct type's fields and whether
// each is always present (no omitempty).
func jsonFields(t *testing.T, typ reflect.Type) map[string]bool {
	t.Helper()
	fields := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = !strings.Contains(","+opts+",", ",omitempty,")
	}
	return fields
}

// TestOpenAPISchemasMatchTypes checks, both ways, that each schema's
// properties are the JSON field names of the Go type the server marshals
// (responses) or decodes strictly (requests), that response schemas
// require exactly the fields without omitempty, and that request schemas
// refuse unknown fields as the decoder does.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := openAPIDoc(t)
	schemas := object(t, doc, "components", "schemas")
	cases := []struct {
		schema  string
		typ     any
		request bool
	}{
		{"Customer", customerJSON{}, false},
		{"PaymentMethod", paymentMethodJSON{}, false},
		{"Card", cardJSON{}, false},
		{"BillingDetails", billingJSON{}, false},
		{"Payment", paymentJSON{}, false},
		{"Tax", taxJSON{}, false},
		{"Transaction", transactionJSON{}, false},
		{"Dispute", disputeJSON{}, false},
		{"Event", eventJSON{}, false},
		{"Deleted", deletedJSON{}, false},
		{"CustomerList", listJSON{}, false},
		{"PaymentMethodList", listJSON{}, false},
		{"PaymentList", listJSON{}, false},
		{"EventList", listJSON{}, false},
		{"AnalyticsDay", analyticsDayJSON{}, false},
		{"AnalyticsDayList", listJSON{}, false},
		{"Error", errorBody{}, false},
		{"CustomerRequest", customerRequest{}, true},
		{"CardRequest", cardRequest{}, true},
		{"BillingDetailsRequest", billingJSON{}, true},
		{"PaymentMethodRequest", paymentMethodRequest{}, true},
		{"TaxRequest", taxRequest{}, true},
		{"PaymentRequest", paymentRequest{}, true},
		{"AmountRequest", amountRequest{}, true},
		{"VoidRequest", struct{}{}, true},
		{"EmptyRequest", struct{}{}, true},
		{"WebhookEndpoint", webhookEndpointJSON{}, false},
		{"WebhookEndpointList", listJSON{}, false},
		{"WebhookEndpointRequest", webhookEndpointRequest{}, true},
		{"WebhookSecretRollRequest", rollSecretRequest{}, true},
		{"WebhookDelivery", webhookDeliveryJSON{}, false},
		{"WebhookDeliveryList", listJSON{}, false},
		{"WebhookResendRequest", struct{}{}, true},
	}
	// The error envelope's inner object is checked against errorJSON too.
	errInner := object(t, schemas, "Error", "properties", "error")
	check := func(name string, schema map[string]any, typ reflect.Type, request bool) {
		props, _ := schema["properties"].(map[string]any)
		fields := jsonFields(t, typ)
		for f := range fields {
			if _, ok := props[f]; !ok {
				t.Errorf("schema %s: property %q of Go type %s is missing", name, f, typ.Name())
			}
		}
		for p := range props {
			if _, ok := fields[p]; !ok {
				t.Errorf("schema %s: property %q is not a JSON field of Go type %s", name, p, typ.Name())
			}
		}
		if request {
			if ap, ok := schema["additionalProperties"].(bool); !ok || ap {
				t.Errorf("schema %s: the server refuses unknown fields; want additionalProperties: false", name)
			}
			return
		}
		required := map[string]bool{}
		if rs, ok := schema["required"].([]any); ok {
			for _, r := range rs {
				required[r.(string)] = true
			}
		}
		for f, always := range fields {
			if always != required[f] {
				t.Errorf("schema %s: %q required = %v, want %v (omitempty = %v)", name, f, required[f], always, !always)
			}
		}
	}
	for _, c := range cases {
		s, ok := schemas[c.schema].(map[string]any)
		if !ok {
			t.Errorf("components.schemas.%s is missing", c.schema)
			continue
		}
		check(c.schema, s, reflect.TypeOf(c.typ), c.request)
	}
	check("Error.error", errInner, reflect.TypeFor[errorJSON](), false)
}

// TestOpenAPIServed checks that a Server without an engine serves the
// document and the probes without authentication.
func TestOpenAPIServed(t *testing.T) {
	s := New(Config{})
	for _, path := range []string{"/v1/openapi.json", "/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, rec.Code)
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Errorf("GET %s: no X-Request-Id", path)
		}
		if path == "/v1/openapi.json" && rec.Body.String() != string(OpenAPI()) {
			t.Errorf("GET %s does not serve the embedded document", path)
		}
	}
}

// errorReasons returns every error reason (the API's error code) written
// as a literal in the module's non-test Go code: the Reason field of a
// surgepay.Error literal, and the reason argument of surgepay.Invalid and
// surgepay.Conflict. Each maps to the file and line of its first use.
func errorReasons(t *testing.T) map[string]string {
	t.Helper()
	reasons := map[string]string{}
	add := func(fset *token.FileSet, e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			r, err := strconv.Unquote(lit.Value)
			if err == nil && reasons[r] == "" {
				reasons[r] = fset.Position(lit.Pos()).String()
			}
		}
	}
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Reason" {
					add(fset, n.Value)
				}
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					if x, ok := fn.X.(*ast.Ident); ok && x.Name == "surgepay" {
						name = fn.Sel.Name
					}
				}
				switch {
				case name == "Invalid" && len(n.Args) >= 2:
					add(fset, n.Args[1])
				case name == "Conflict" && len(n.Args) >= 1:
					add(fset, n.Args[0])
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return reasons
}

// TestOpenAPIErrorReasons: every error reason the code can return is
// listed, as `reason`, in the description of the Error schema's code, so
// that a client can look up any code it gets.
func TestOpenAPIErrorReasons(t *testing.T) {
	doc := openAPIDoc(t)
	code := object(t, doc, "components", "schemas", "Error", "properties", "error", "properties", "code")
	desc, _ := code["description"].(string)
	reasons := errorReasons(t)
	if len(reasons) < 20 {
		t.Fatalf("found %d error reasons in the code, want the 20 or more there are: is the scan broken?", len(reasons))
	}
	var missing []string
	for r, at := range reasons {
		if !strings.Contains(desc, "`"+r+"`") {
			missing = append(missing, r+" ("+at+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("error reason %s is not in openapi.json's Error code description", m)
	}
}

// TestOpenAPIStreamlinedStates: the states of the streamlined path and of
// the stores that docs/streamlined.md and docs/state-machine.md describe
// are in the spec where a client looks for them.
func TestOpenAPIStreamlinedStates(t *testing.T) {
	doc := openAPIDoc(t)
	ops := specOperations(t, doc)
	desc := func(v map[string]any) string { s, _ := v["description"].(string); return s }
	refund409 := object(t, ops["POST /v1/payments/{id}/refunds"], "responses", "409")
	unavailable := object(t, doc, "components", "responses", "ServiceUnavailable")
	for _, tc := range []struct{ where, text, want string }{
		{"POST /v1/payments/{id}/refunds 409", desc(refund409), "`capture_pending`"},
		{"components.responses.ServiceUnavailable", desc(unavailable), "`stage_unavailable`"},
		{"components.responses.ServiceUnavailable", desc(unavailable), "`reject`"},
		{"components.responses.ServiceUnavailable", desc(unavailable), "`store_locked`"},
		{"components.schemas.PaymentStatus", desc(object(t, doc, "components", "schemas", "PaymentStatus")),
			"`failed` for a streamlined sale whose staged capture the network declines at settlement"},
		{"components.schemas.Transaction.status", desc(object(t, doc, "components", "schemas", "Transaction", "properties", "status")),
			"On a streamlined sale, the capture transaction is `pending`"},
		{"POST /v1/payments", desc(ops["POST /v1/payments"]), "`stage_unavailable`"},
	} {
		if !strings.Contains(tc.text, tc.want) {
			t.Errorf("%s does not document %s:\n%s", tc.where, tc.want, tc.text)
		}
	}
}

// TestOpenAPILimitsMatchCode: every bound the document states is the
// constant the server enforces (limits.go), so that changing one without
// the other fails here.
func TestOpenAPILimitsMatchCode(t *testing.T) {
	doc := openAPIDoc(t)
	schemas := object(t, doc, "components", "schemas")
	params := object(t, doc, "components", "parameters")
	num := func(m map[string]any, path ...string) float64 {
		t.Helper()
		v, ok := object(t, m, path[:len(path)-1]...)[path[len(path)-1]].(float64)
		if !ok {
			t.Fatalf("openapi.json: %s is not a number", strings.Join(path, "."))
		}
		return v
	}
	for _, tc := range []struct {
		where string
		got   float64
		want  int64
	}{
		{"CustomerRequest.name.maxLength", num(schemas, "CustomerRequest", "properties", "name", "maxLength"), surgepay.TextBytesMax},
		{"CustomerRequest.email.maxLength", num(schemas, "CustomerRequest", "properties", "email", "maxLength"), surgepay.TextBytesMax},
		{"CustomerRequest.description.maxLength", num(schemas, "CustomerRequest", "properties", "description", "maxLength"), surgepay.TextBytesMax},
		{"PaymentRequest.description.maxLength", num(schemas, "PaymentRequest", "properties", "description", "maxLength"), surgepay.TextBytesMax},
		{"BillingDetailsRequest.name.maxLength", num(schemas, "BillingDetailsRequest", "properties", "name", "maxLength"), surgepay.TextBytesMax},
		{"WebhookEndpointRequest.description.maxLength", num(schemas, "WebhookEndpointRequest", "properties", "description", "maxLength"), surgepay.TextBytesMax},
		{"WebhookEndpointRequest.url.maxLength", num(schemas, "WebhookEndpointRequest", "properties", "url", "maxLength"), surgepay.WebhookURLBytesMax},
		{"Metadata.maxProperties", num(schemas, "Metadata", "maxProperties"), surgepay.MetadataKeysMax},
		{"Metadata values maxLength", num(schemas, "Metadata", "additionalProperties", "maxLength"), surgepay.MetadataValueBytesMax},
		{"PaymentRequest.amount.maximum", num(schemas, "PaymentRequest", "properties", "amount", "maximum"), surgepay.AmountMinorMax},
		{"AmountRequest.amount.maximum", num(schemas, "AmountRequest", "properties", "amount", "maximum"), surgepay.AmountMinorMax},
		{"Idempotency-Key maxLength", num(params, "Idempotency-Key", "schema", "maxLength"), surgepay.IdempotencyKeyBytesMax},
		{"Limit maximum", num(params, "Limit", "schema", "maximum"), surgepay.ListLimitMax},
		{"TaxRequest.country.maxLength", num(schemas, "TaxRequest", "properties", "country", "maxLength"), surgepay.TaxFieldBytesMax},
		{"TaxRequest.region.maxLength", num(schemas, "TaxRequest", "properties", "region", "maxLength"), surgepay.TaxFieldBytesMax},
		{"TaxRequest.postal_code.maxLength", num(schemas, "TaxRequest", "properties", "postal_code", "maxLength"), surgepay.TaxFieldBytesMax},
		{"TaxRequest.category.maxLength", num(schemas, "TaxRequest", "properties", "category", "maxLength"), surgepay.TaxFieldBytesMax},
		{"Limit default", num(params, "Limit", "schema", "default"), surgepay.ListLimitDefault},
	} {
		if int64(tc.got) != tc.want {
			t.Errorf("%s = %v, the server's bound is %d", tc.where, tc.got, tc.want)
		}
	}
	info, _ := object(t, doc, "info")["description"].(string)
	for _, want := range []string{fmt.Sprintf("at most %d bytes", surgepay.RequestBodyBytesMax),
		fmt.Sprintf("at most %d keys", surgepay.MetadataKeysMax), fmt.Sprintf("(1-%d, default %d)", surgepay.ListLimitMax, surgepay.ListLimitDefault)} {
		if !strings.Contains(info, want) {
			t.Errorf("info.description does not say %q", want)
		}
	}
}
