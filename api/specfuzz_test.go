package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"pgregory.net/rapid"

	"github.com/surgepay/surgepay/internal/testenv"
)

// The generated-request fuzz run: requests drawn from the OpenAPI document
// the server serves (GET /v1/openapi.json), valid and invalid, sent over
// loopback HTTP to a real server on SQLite with the simulator. For every
// request:
//   - no 5xx;
//   - a request the document calls invalid (kin-openapi's openapi3filter
//     decides) is never answered 2xx;
//   - a request the document calls valid is never refused for its shape
//     (structuralReasons): the document is not looser than the server;
//   - every 4xx is a JSON error with a type, a code and a message, and a
//     400 names the field in param;
//   - every answer matches the document's response for its status.
//
// It runs rapid's default 100 checks per operation from a fixed seed
// (about 2,500 requests, a few seconds), so `make test` is deterministic;
// RAPID_SEED=N picks another seed and RAPID_CHECKS=N more checks:
//
//	RAPID_CHECKS=2000 RAPID_SEED=7 go test -run TestSpecFuzz ./api/
func TestSpecFuzz(t *testing.T) {
	if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() == "0" && os.Getenv("RAPID_SEED") == "" {
		if err := f.Value.Set(strconv.Itoa(specFuzzSeed)); err != nil {
			t.Fatal(err)
		}
	}
	// No fail files under testdata: a failure prints its seed, which
	// reproduces it with the same server code.
	if f := flag.Lookup("rapid.nofailfile"); f != nil && os.Getenv("RAPID_NOFAILFILE") == "" {
		if err := f.Value.Set("true"); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, testenv.OpenSQLite(t))
	doc := servedSpec(t, e)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixtures(t, e)
	tally := &specTally{}
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			f := &specFuzz{e: e, doc: doc, router: router, fx: fx, method: method, path: path, op: op, tally: tally}
			t.Run(method+" "+path, rapid.MakeCheck(f.check))
		}
	}
	t.Logf("%d requests: %d valid by the document, %d answered 2xx, %d 4xx", tally.requests, tally.valid, tally.ok, tally.refused)
	if tally.ok == 0 || tally.refused == 0 || tally.valid == tally.requests {
		t.Errorf("the run did not cover both sides (%+v): is the generator broken?", tally)
	}
}

// specTally counts a run's requests (operations run one at a time).
type specTally struct{ requests, valid, ok, refused int }

// specFuzzSeed is the run's seed unless RAPID_SEED or -rapid.seed says.
const specFuzzSeed = 1

// structuralReasons are the error codes of a request the document itself
// can describe as invalid (type, length, range, pattern, enum, required,
// unknown field, media type): a request the document calls valid must not
// get one. Codes that depend on stored state or on rules the document
// states only in prose (card_number_in_text, invalid_characters, a Luhn
// check, an expired card, an unknown currency) may answer a valid shape.
var structuralReasons = []string{"invalid_json", "unknown_field", "invalid_type", "body_too_large", "too_long",
	"too_many_keys", "unsupported_media_type", "idempotency_key_invalid", "invalid_query",
	"amount_too_small", "amount_too_large", "invalid_expiry_month", "invalid_expiry_year", "missing", "invalid_email"}

// structuralReason reports whether code, answered to op, is about the
// request's shape. A card's cvc length depends on its brand (4 digits for
// American Express), which the document states in prose; a payment's cvc
// is 3 or 4 digits whatever the card.
func structuralReason(op, code string) bool {
	switch code {
	case "invalid_cvc":
		return op == "createPayment"
	case "too_many_keys":
		// An update's metadata is merged into the stored keys: their
		// count is the stored state's, which no request schema knows.
		return op != "updateCustomer"
	}
	return slices.Contains(structuralReasons, code)
}

// servedSpec loads the document the server serves, with the test server
// as its only server so the router matches its URLs.
func servedSpec(t *testing.T, e *env) *openapi3.T {
	t.Helper()
	res, err := e.http.Get(e.url + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("load the served OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served OpenAPI document is not valid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: e.url}}
	return doc
}

// fixtures are objects that exist, so generated requests reach past
// "not found" to the engine's rules.
type fixtures struct {
	ids map[string][]string // by kind: cus, pm, pay, we
}

func newFixtures(t *testing.T, e *env) *fixtures {
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	auth := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 5000, "manual")).str("id")
	sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 5000, "automatic")).str("id")
	we := e.must(200, e.keyA, "POST", "/v1/webhook_endpoints", `{"url":"https://example.com/hook"}`).str("id")
	_, pmB := e.customerWithCard(e.keyB, "5555555555554444") // another merchant's: must stay invisible
	return &fixtures{ids: map[string][]string{"cus": {cus}, "pm": {pm, pmB}, "pay": {auth, sale}, "we": {we}}}
}

// idKind is the kind of object a path or body field names.
func idKind(path, name string) string {
	switch {
	case name == "customer":
		return "cus"
	case name == "payment_method":
		return "pm"
	case name != "id":
		return ""
	case strings.HasPrefix(path, "/v1/customers"):
		return "cus"
	case strings.HasPrefix(path, "/v1/payment_methods"):
		return "pm"
	case strings.HasPrefix(path, "/v1/payments"):
		return "pay"
	case strings.HasPrefix(path, "/v1/webhook_endpoints"):
		return "we"
	}
	return ""
}

type specFuzz struct {
	e            *env
	doc          *openapi3.T
	router       routers.Router
	fx           *fixtures
	method, path string
	op           *openapi3.Operation
	tally        *specTally
}

// fuzzRequest is one generated request.
type fuzzRequest struct {
	method, target string
	header         http.Header
	body           []byte
}

func (r *fuzzRequest) String() string {
	return fmt.Sprintf("%s %s %v %q", r.method, r.target, r.header, r.body)
}

func (f *specFuzz) check(t *rapid.T) {
	req := f.generate(t)
	valid, reason := f.validate(req)
	status, header, body := f.send(t, req)
	var eb struct {
		Error struct{ Type, Code, Message, Param string } `json:"error"`
	}
	_ = json.Unmarshal(body, &eb)
	f.tally.requests++
	if valid {
		f.tally.valid++
	}
	if status < 300 {
		f.tally.ok++
	} else if status < 500 {
		f.tally.refused++
	}
	switch {
	case status >= 500:
		t.Fatalf("%s: got %d %s", req, status, body)
	case !valid && status < 300:
		t.Fatalf("%s: the document calls it invalid (%s), the server answered %d %s", req, reason, status, body)
	case valid && status >= 400 && structuralReason(f.op.OperationID, eb.Error.Code):
		t.Fatalf("%s: the document calls it valid, the server refused its shape: %d %s", req, status, body)
	case status >= 400 && (eb.Error.Type == "" || eb.Error.Code == "" || eb.Error.Message == ""):
		t.Fatalf("%s: %d without a JSON error (type, code, message): %s", req, status, body)
	case status == 400 && eb.Error.Param == "":
		t.Fatalf("%s: 400 %s names no field (param): %s", req, eb.Error.Code, body)
	}
	// An invalid request may match another route of the document, or
	// none (405, 404 route_not_found): only a valid one's answer must be
	// the one its operation documents.
	if !valid {
		return
	}
	if err := f.validateResponse(req, status, header, body); err != nil {
		t.Fatalf("%s: the answer %d %s does not match the document: %v", req, status, body, err)
	}
}

// validate reports whether the document accepts req, and why not.
func (f *specFuzz) validate(req *fuzzRequest) (bool, string) {
	input, err := f.input(req)
	if err != nil {
		return false, err.Error()
	}
	// A malformed query string is invalid whatever the parameters say (the
	// validator reads what url.ParseQuery could salvage, and rewrites the
	// query with the defaults it sets).
	if _, err := url.ParseQuery(input.Request.URL.RawQuery); err != nil {
		return false, err.Error()
	}
	if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
		return false, err.Error()
	}
	// The document says in prose what OpenAPI cannot: a body's media type
	// takes no parameter but charset=utf-8 (the validator ignores them).
	if ct := req.header.Get("Content-Type"); f.op.RequestBody != nil && len(req.body) > 0 && ct != "application/json" &&
		!strings.EqualFold(strings.ReplaceAll(ct, " ", ""), "application/json;charset=utf-8") {
		return false, "Content-Type " + ct
	}
	return true, ""
}

func (f *specFuzz) input(req *fuzzRequest) (*openapi3filter.RequestValidationInput, error) {
	hr, err := http.NewRequest(req.method, f.e.url+req.target, bytes.NewReader(req.body))
	if err != nil {
		return nil, err
	}
	hr.Header = req.header.Clone()
	route, params, err := f.router.FindRoute(hr)
	if err != nil {
		return nil, err
	}
	return &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true}}, nil
}

func (f *specFuzz) validateResponse(req *fuzzRequest, status int, header http.Header, body []byte) error {
	input, err := f.input(req)
	if err != nil {
		return nil // a request no route of the document matches: nothing to compare
	}
	return openapi3filter.ValidateResponse(context.Background(), (&openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}).SetBodyBytes(body))
}

func (f *specFuzz) send(t *rapid.T, req *fuzzRequest) (int, http.Header, []byte) {
	hr, err := http.NewRequest(req.method, f.e.url+req.target, bytes.NewReader(req.body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header = req.header.Clone()
	hr.Header.Set("Authorization", "Bearer "+f.e.keyA)
	res, err := f.e.http.Do(hr)
	if err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: read the answer: %v", req, err)
	}
	return res.StatusCode, res.Header, b
}

// generate draws a request for the operation: parameters and body from
// their schemas, then, half the time, one thing broken.
func (f *specFuzz) generate(t *rapid.T) *fuzzRequest {
	g := &gen{t: t, fx: f.fx, path: f.path}
	req := &fuzzRequest{method: f.method, header: http.Header{}}
	target := f.path
	q := url.Values{}
	for _, pr := range append(f.doc.Paths.Value(f.path).Parameters, f.op.Parameters...) {
		p := pr.Value
		if !p.Required && !rapid.Bool().Draw(t, "with "+p.Name) {
			continue
		}
		v := g.param(p)
		switch p.In {
		case openapi3.ParameterInPath:
			target = strings.ReplaceAll(target, "{"+p.Name+"}", url.PathEscape(v))
		case openapi3.ParameterInQuery:
			q.Set(p.Name, v)
		case openapi3.ParameterInHeader:
			req.header.Set(p.Name, v)
		}
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req.target = target
	if rb := f.op.RequestBody; rb != nil && (rb.Value.Required || rapid.Bool().Draw(t, "with body")) {
		if mt := rb.Value.Content.Get("application/json"); mt != nil {
			b, err := json.Marshal(g.value(mt.Schema, "", 0))
			if err != nil {
				t.Fatal(err)
			}
			req.body = b
			req.header.Set("Content-Type", "application/json")
		}
	}
	if rapid.Bool().Draw(t, "break it") {
		g.breakRequest(req)
	}
	return req
}

// gen draws values from schemas.
type gen struct {
	t    *rapid.T
	fx   *fixtures
	path string
}

func (g *gen) param(p *openapi3.Parameter) string {
	if kind := idKind(g.path, p.Name); kind != "" && rapid.IntRange(0, 3).Draw(g.t, p.Name+" known") > 0 {
		return rapid.SampledFrom(g.fx.ids[kind]).Draw(g.t, p.Name)
	}
	if p.In == openapi3.ParameterInHeader && p.Schema.Value.Pattern == "" {
		// What an HTTP client can send in a header: printable ASCII.
		maxLen := 80
		if p.Schema.Value.MaxLength != nil {
			maxLen = int(*p.Schema.Value.MaxLength)
		}
		return rapid.StringOfN(rapid.RuneFrom(nil, &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0x21, Hi: 0x7e, Stride: 1}}}),
			int(p.Schema.Value.MinLength), maxLen, maxLen).Draw(g.t, p.Name)
	}
	switch v := g.value(p.Schema, p.Name, 0).(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// value draws a JSON value the schema accepts (name is the property's).
func (g *gen) value(ref *openapi3.SchemaRef, name string, depth int) any {
	s := ref.Value
	if kind := idKind(g.path, name); kind != "" && rapid.IntRange(0, 3).Draw(g.t, name+" known") > 0 {
		return rapid.SampledFrom(g.fx.ids[kind]).Draw(g.t, name)
	}
	if len(s.Enum) > 0 {
		return rapid.SampledFrom(s.Enum).Draw(g.t, name)
	}
	switch {
	case s.Type.Is("object"):
		return g.object(s, depth)
	case s.Type.Is("integer"):
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if s.Min != nil {
			lo = int64(*s.Min)
		}
		if s.Max != nil {
			hi = int64(*s.Max)
		}
		n := rapid.Int64Range(lo, hi).Draw(g.t, name)
		if name == "amount" && n >= 9101 && n <= 9105 {
			n = 9100 // the simulator's fault triggers (docs/simulator.md) answer 503 by design
		}
		return n
	case s.Type.Is("boolean"):
		return rapid.Bool().Draw(g.t, name)
	case s.Type.Is("array"):
		n := rapid.IntRange(0, 3).Draw(g.t, name+" len")
		out := make([]any, n)
		for i := range out {
			out[i] = g.value(s.Items, name, depth+1)
		}
		return out
	}
	return g.str(s, name)
}

func (g *gen) str(s *openapi3.Schema, name string) string {
	if s.Pattern != "" {
		return rapid.StringMatching(s.Pattern).Draw(g.t, name)
	}
	maxLen := 40
	if s.MaxLength != nil && int(*s.MaxLength) < maxLen {
		maxLen = int(*s.MaxLength)
	}
	if rapid.IntRange(0, 9).Draw(g.t, name+" long") == 0 && s.MaxLength != nil {
		maxLen = int(*s.MaxLength) // at the bound, sometimes
	}
	minLen := int(s.MinLength)
	if rapid.Bool().Draw(g.t, name+" plain") {
		return rapid.StringOfN(rapid.RuneFrom([]rune("abcxyzABC019 -_.@é")), minLen, maxLen, maxLen).Draw(g.t, name)
	}
	return rapid.StringN(minLen, maxLen, maxLen).Draw(g.t, name) // bytes bound by maxLen too: the server counts bytes
}

func (g *gen) object(s *openapi3.Schema, depth int) map[string]any {
	out := map[string]any{}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if depth > 4 || (!slices.Contains(s.Required, n) && !rapid.Bool().Draw(g.t, "with "+n)) {
			continue
		}
		out[n] = g.value(s.Properties[n], n, depth+1)
	}
	if ap := s.AdditionalProperties.Schema; ap != nil {
		maxKeys := 3
		if s.MaxProps != nil {
			maxKeys = min(maxKeys, int(*s.MaxProps))
		}
		for i := range rapid.IntRange(0, maxKeys).Draw(g.t, "keys") {
			// Keys of 1 to 40 bytes: OpenAPI 3.0 cannot bound a key, the
			// document says it in prose.
			k := rapid.StringOfN(rapid.RuneFrom([]rune("abcdefgh_0123")), 0, 39, 39).Draw(g.t, "key") + strconv.Itoa(i)
			out[k] = g.value(ap, "", depth+1)
		}
	}
	return out
}

// breakRequest changes one thing, most often to something the document
// refuses.
func (g *gen) breakRequest(req *fuzzRequest) {
	var body map[string]any
	_ = json.Unmarshal(req.body, &body)
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changed := false // body was changed, to marshal again
	switch rapid.IntRange(0, 9).Draw(g.t, "break") {
	case 0:
		req.header.Set("Content-Type", rapid.SampledFrom([]string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"}).Draw(g.t, "content type"))
		if len(req.body) == 0 {
			req.body = []byte(`{}`)
		}
	case 1:
		req.header.Set("Content-Type", "application/json")
		req.body = []byte(rapid.SampledFrom([]string{`{`, `[]`, `{"a":1} {}`, `"x"`, `null`, `{"amount":1e400}`, "{\"name\":\"\xff\"}"}).Draw(g.t, "bad json"))
	case 2:
		if body == nil {
			body = map[string]any{}
			req.header.Set("Content-Type", "application/json")
		}
		body["zz_unknown"] = rapid.SampledFrom([]any{1, "x", nil, true}).Draw(g.t, "unknown")
		changed = true
	case 3, 4:
		if len(keys) > 0 {
			k := rapid.SampledFrom(keys).Draw(g.t, "field")
			body[k] = rapid.SampledFrom([]any{"text", -1, 0, 1.5, 1e12, true, nil, []any{}, map[string]any{}, strings.Repeat("x", 1001), "4242 4242 4242 4242"}).Draw(g.t, "value")
			changed = true
		}
	case 5:
		if len(keys) > 0 {
			delete(body, rapid.SampledFrom(keys).Draw(g.t, "drop"))
			changed = true
		}
	case 6:
		req.header.Set("Idempotency-Key", rapid.SampledFrom([]string{"has space", strings.Repeat("k", 256), "ü", "order-4242424242424242"}).Draw(g.t, "idempotency key"))
	case 7:
		req.target += sep(req.target) + rapid.SampledFrom([]string{"limit=0", "limit=101", "limit=x", "customer=%zz", "status=paid", "created_gte=-1"}).Draw(g.t, "query")
	case 8:
		if body != nil {
			md := map[string]any{}
			for i := range rapid.IntRange(19, 22).Draw(g.t, "metadata keys") {
				md["k"+strconv.Itoa(i)] = "v"
			}
			body["metadata"] = md
			changed = true
		}
	case 9:
		req.method = rapid.SampledFrom([]string{"PUT", "PATCH", "DELETE", "GET", "POST"}).Draw(g.t, "method")
	}
	if changed {
		req.body, _ = json.Marshal(body)
	}
}

func sep(target string) string {
	if strings.Contains(target, "?") {
		return "&"
	}
	return "?"
}
