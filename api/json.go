package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// readBody returns the request body: the one admission read (within
// BodyReadTimeout, see admit), or, for a request admitted without one,
// the body read now, of at most surgepay.RequestBodyBytesMax.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if st, ok := r.Context().Value(requestStateKey{}).(*requestState); ok && st.bodyRead {
		return st.body, st.bodyErr
	}
	return readBodyMax(w, r, surgepay.RequestBodyBytesMax)
}

// readBodyMax reads a request body of at most n bytes. A read cut by the
// connection's read deadline is a 408 body_timeout.
func readBodyMax(w http.ResponseWriter, r *http.Request, n int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &surgepay.Error{Code: surgepay.EINVALID, Reason: "body_too_large", Param: "body",
			Message: fmt.Sprintf("the request body must be at most %d bytes", n)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &surgepay.Error{Code: ETIMEOUT, Reason: "body_timeout", Param: "body",
			Message: "the request body did not arrive in time (body_read_timeout)"}
	}
	if err != nil {
		return nil, surgepay.Invalid("body", "body_unreadable", "the request body could not be read")
	}
	return body, nil
}

// decode parses body into v strictly: unknown fields, wrong types, trailing
// data and malformed JSON are EINVALID errors naming the field, and so are
// what encoding/json would accept silently (checkJSON): invalid UTF-8, a
// lone surrogate escape, a key that names a field in another case
// (`{"AMOUNT":101}` made a payment of 101), a key given twice, control or
// invisible format characters in names, emails and descriptions, control
// characters in metadata. An empty body decodes as {}.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := checkJSON(body, schemaOf(reflect.TypeOf(v))); err != nil {
		return err
	}
	return decodeOnly(body, v)
}

// decodeOnly is decode without checkJSON: encoding/json's own strictness,
// and an object (encoding/json takes null for a struct and leaves it as
// it was).
func decodeOnly(body []byte, v any) error {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] != '{' {
		return surgepay.Invalid("body", "invalid_json", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return surgepay.Invalid("body", "invalid_json", "the request body must hold one JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return surgepay.Invalid("body", "invalid_json", "the request body must hold one JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return surgepay.Invalid("body", "invalid_json", "malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		param := te.Field
		if param == "" {
			return surgepay.Invalid("body", "invalid_json", "the request body must be a JSON object")
		}
		return surgepay.Invalid(param, "invalid_type", "%s must be %s", param, typeName(te.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return surgepay.Invalid("body", "invalid_json", "the JSON in the request body is truncated")
	}
	// Not the library's unknown field, matched by its text before: decode
	// runs checkJSON first, which refuses every key no field of a struct
	// takes (unknown_field, naming it), so the decoder's own refusal
	// (DisallowUnknownFields, a backstop) never reaches here with a
	// schema checkJSON built (TestDecodeUnknownFieldIsTheScanners).
	return surgepay.Invalid("body", "invalid_json", "the request body is not valid JSON")
}

func typeName(kind string) string {
	switch kind {
	case "int64", "int", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "map":
		return "an object of string values"
	case "struct", "ptr":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "of another type"
}

// errorBody is the JSON error envelope.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Type        string `json:"type"`
	Code        string `json:"code"`
	Message     string `json:"message"`
	Param       string `json:"param,omitempty"`
	DeclineCode string `json:"decline_code,omitempty"`
	Payment     string `json:"payment,omitempty"`
}

// statusOf maps an error code to its HTTP status.
func statusOf(code string) int {
	switch code {
	case ENOTALLOWED:
		return http.StatusMethodNotAllowed
	case EUNSUPPORTEDMEDIA:
		return http.StatusUnsupportedMediaType
	case EHEADTOOLARGE:
		return http.StatusRequestHeaderFieldsTooLarge
	case EVERSION:
		return http.StatusHTTPVersionNotSupported
	case surgepay.EINVALID:
		return http.StatusBadRequest
	case ETIMEOUT:
		return http.StatusRequestTimeout
	case surgepay.EUNAUTH:
		return http.StatusUnauthorized
	case surgepay.EFORBIDDEN:
		return http.StatusForbidden
	case surgepay.EDECLINED:
		return http.StatusPaymentRequired
	case surgepay.ENOTFOUND:
		return http.StatusNotFound
	case surgepay.ECONFLICT:
		return http.StatusConflict
	case surgepay.EUNPROCESS:
		return http.StatusUnprocessableEntity
	case surgepay.ERATELIMIT:
		return http.StatusTooManyRequests
	case surgepay.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func errorType(e *surgepay.Error) string {
	switch {
	case e.Code == surgepay.EDECLINED:
		return "card_error"
	case e.Code == surgepay.EUNAUTH:
		return "authentication_error"
	case e.Code == surgepay.EFORBIDDEN:
		return "permission_error"
	case strings.HasPrefix(e.Reason, "idempotency_"):
		return "idempotency_error"
	case e.Code == surgepay.ERATELIMIT:
		return "rate_limit_error"
	case e.Code == surgepay.EINTERNAL, e.Code == surgepay.EUNAVAILABLE:
		return "api_error"
	}
	return "invalid_request_error"
}

// errorJSONOf turns any error into the envelope; non-domain errors become a
// generic internal error whose detail stays in the server log.
func errorJSONOf(err error) (int, errorBody) {
	var e *surgepay.Error
	if !errors.As(err, &e) {
		e = &surgepay.Error{Code: surgepay.EINTERNAL, Reason: "internal_error", Message: "an internal error occurred"}
	}
	e = errorWithoutCardNumber(e)
	code := e.Reason
	if code == "" {
		code = e.Code
	}
	if e.Code == surgepay.EDECLINED {
		code = "card_declined"
	}
	return statusOf(e.Code), errorBody{Error: errorJSON{Type: errorType(e), Code: code, Message: e.Message,
		Param: e.Param, DeclineCode: e.DeclineCode, Payment: e.PaymentID}}
}

// render returns the status and body the client gets for (v, err). It is
// deterministic, so a stored response equals a fresh rendering.
func render(v any, err error) (int, []byte) {
	if err != nil {
		status, eb := errorJSONOf(err)
		b, _ := json.Marshal(eb)
		return status, append(b, '\n')
	}
	if p, ok := v.(*surgepay.Payment); ok {
		pj := paymentOf(p)
		return http.StatusOK, append(appendPaymentJSON(make([]byte, 0, paymentJSONBytes), &pj), '\n')
	}
	b, merr := json.Marshal(toJSON(v))
	if merr != nil {
		return render(nil, fmt.Errorf("marshal response: %w", merr))
	}
	return http.StatusOK, append(b, '\n')
}

// paymentJSONBytes is the buffer a payment's answer starts in: a sale's
// is ~730 bytes.
const paymentJSONBytes = 1024

// toJSON maps domain values to their API representation.
func toJSON(v any) any {
	switch x := v.(type) {
	case *surgepay.Customer:
		return customerOf(x)
	case *surgepay.PaymentMethod:
		return paymentMethodOf(x)
	case *surgepay.Payment:
		return paymentOf(x)
	case *engine.Deleted:
		return deletedJSON{ID: x.ID, Object: x.Object, Deleted: true}
	}
	return v
}

// JSONDepthMax bounds the nesting checkJSON walks (request bodies are two
// or three levels deep).
const JSONDepthMax = 32

// checkJSON refuses what encoding/json would take silently. It names the
// field by its dotted path (card.number). Malformed JSON is left to the
// decoder, which says where. It scans the bytes once without allocating
// (an escaped key or text value is unescaped, the rare case): a
// json.Decoder token walk cost 9 µs and 178 allocations per payment body
// (BenchmarkDecodePayment), against a CPU budget of 100 µs per sale.
// sc is the shape of the value the body decodes into (schemaOf); nil
// checks no field names.
func checkJSON(body []byte, sc *jsonSchema) error {
	if !utf8.Valid(body) {
		return surgepay.Invalid("body", "invalid_utf8", "the request body is not valid UTF-8")
	}
	var s jsonScan
	s.b, s.keys = body, s.keysBuf[:0]
	s.value(0, sc, false)
	return s.err
}

// jsonSchema is the shape checkJSON holds a body to: a struct's fields by
// their JSON names in their exact case (encoding/json matches names
// without case, so `{"AMOUNT":101}` and `card.NUMBER` were taken), and what
// each field, map value or slice element holds.
type jsonSchema struct {
	fields map[string]*jsonSchema // a struct's, by exact name; nil for a map or slice
	elem   *jsonSchema            // a map's values or a slice's elements
	isMap  bool                   // keys are data (metadata): any key, checked as text
}

// jsonSchemas caches schemaOf by reflect.Type: a request's lookup neither
// allocates nor walks the type again.
var jsonSchemas sync.Map

// schemaOf returns the schema of t (through pointers): nil for a type
// whose keys it cannot know (an interface, a json.Unmarshaler) or that has
// none (a string, a number).
func schemaOf(t reflect.Type) *jsonSchema {
	if t == nil {
		return nil
	}
	if sc, ok := jsonSchemas.Load(t); ok {
		return sc.(*jsonSchema)
	}
	sc := buildSchema(t, map[reflect.Type]*jsonSchema{})
	jsonSchemas.Store(t, sc)
	return sc
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func buildSchema(t reflect.Type, building map[reflect.Type]*jsonSchema) *jsonSchema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if sc, ok := building[t]; ok {
		return sc // a recursive type
	}
	switch t.Kind() {
	case reflect.Struct:
		sc := &jsonSchema{fields: map[string]*jsonSchema{}}
		building[t] = sc
		addFields(sc, t, building)
		return sc
	case reflect.Map:
		return &jsonSchema{isMap: true, elem: buildSchema(t.Elem(), building)}
	case reflect.Slice, reflect.Array:
		if elem := buildSchema(t.Elem(), building); elem != nil {
			return &jsonSchema{elem: elem}
		}
	}
	return nil
}

// addFields adds t's fields to sc by the names encoding/json gives them:
// the tag's name, else the Go name; an untagged embedded struct's fields
// as its own.
func addFields(sc *jsonSchema, t reflect.Type, building map[reflect.Type]*jsonSchema) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(sc, ft, building)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sc.fields[name] = buildSchema(f.Type, building)
	}
}

// jsonScan is checkJSON's scanner: a recursive descent over the body that
// stops (with err nil) at anything malformed.
type jsonScan struct {
	b    []byte
	i    int
	keys [][]byte // the keys from the root to the value being scanned
	// keysBuf holds keys for bodies up to its depth without allocating.
	keysBuf [8][]byte
	err     error
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// value scans one value of schema sc; inMap says it is a map's value
// (metadata), where control characters are refused. False when the scan
// must stop.
func (s *jsonScan) value(depth int, sc *jsonSchema, inMap bool) bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{', '[':
		if depth >= JSONDepthMax {
			s.err = surgepay.Invalid("body", "invalid_json", "the request body nests deeper than %d levels", JSONDepthMax)
			return false
		}
		if s.b[s.i] == '{' {
			return s.object(depth+1, sc)
		}
		var elem *jsonSchema
		if sc != nil {
			elem = sc.elem
		}
		return s.array(depth+1, elem)
	case '"':
		str, ok := s.str()
		switch {
		case ok && s.textField() && hasHidden(str):
			path := s.path()
			s.err = surgepay.Invalid(path, "invalid_characters", "%s must not hold control, bidirectional-override or other invisible format characters", path)
			return false
		case ok && inMap && hasControl(str):
			path := s.path()
			s.err = surgepay.Invalid(path, "invalid_characters", "%s must not hold control characters", path)
			return false
		}
		return ok
	}
	start := s.i
	for s.i < len(s.b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(s.b[s.i])) {
		s.i++ // a number or a literal
	}
	if string(s.b[start:s.i]) == "null" && !s.nullable() {
		if path := s.path(); path != "" {
			s.err = surgepay.Invalid(path, "invalid_type", "%s must not be null (leave it out instead)", path)
		} else {
			s.err = surgepay.Invalid("body", "invalid_json", "the request body must be a JSON object")
		}
		return false
	}
	return true
}

// nullable reports whether the value being scanned may be null: a
// top-level name, email or description, where null means "not given"
// (a customer update leaves the field as it is). encoding/json takes null
// for any field and leaves it unset, so {"metadata":null} or
// {"amount":null} passed as absent where the OpenAPI document said an
// object or an integer.
func (s *jsonScan) nullable() bool {
	return len(s.keys) == 1 && s.textField()
}

func (s *jsonScan) object(depth int, sc *jsonSchema) bool {
	s.i++ // {
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' && first {
			s.i++
			return true
		}
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, ok := s.str()
		if !ok {
			return false
		}
		// A struct's keys are its fields' names in their exact case; a
		// map's (metadata) are data: "Amount" and "amount" are two.
		var child *jsonSchema
		switch {
		case sc != nil && sc.isMap:
			child = sc.elem
			if hasControl(key) {
				path := s.path()
				s.err = surgepay.Invalid(path, "invalid_characters", "%s keys must not hold control characters", path)
				return false
			}
		case sc != nil:
			f, known := sc.fields[string(key)]
			if !known {
				s.keys = append(s.keys, key)
				path := s.path()
				s.err = surgepay.Invalid(path, "unknown_field", "unknown field %s (field names are matched in their exact case)", path)
				return false
			}
			child = f
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				s.keys = append(s.keys, key)
				path := s.path()
				s.err = surgepay.Invalid(path, "duplicate_field", "%s is given twice", path)
				return false
			}
		}
		seen = append(seen, key)
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.keys = append(s.keys, key)
		ok = s.value(depth, child, sc != nil && sc.isMap)
		s.keys = s.keys[:len(s.keys)-1]
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScan) array(depth int, elem *jsonSchema) bool {
	s.i++ // [
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' && first {
			s.i++
			return true
		}
		if !s.value(depth, elem, false) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads the string at s.i: its bytes, unescaped (which allocates) only
// when it holds an escape. A lone surrogate escape stops the scan with an
// error: encoding/json turns "\ud800" into U+FFFD, text the client never
// sent.
func (s *jsonScan) str() ([]byte, bool) {
	start := s.i
	escaped := false
	for j := start + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			if !escaped {
				return s.b[start+1 : j], true
			}
			if loneSurrogate(s.b[start+1 : j]) {
				path := s.path()
				if path == "" {
					path = "body"
				}
				s.err = surgepay.Invalid(path, "invalid_utf8", "%s holds a lone UTF-16 surrogate escape (\\ud800 to \\udfff not in a pair), which is no character", path)
				return nil, false
			}
			var out string
			if json.Unmarshal(s.b[start:j+1], &out) != nil {
				return nil, false
			}
			return []byte(out), true
		}
	}
	return nil, false
}

// textField reports whether the value being scanned is free text shown to
// people (names, emails, descriptions), where control and bidirectional
// characters can disguise what is displayed.
func (s *jsonScan) textField() bool {
	if len(s.keys) == 0 {
		return false
	}
	k := s.keys[len(s.keys)-1]
	return bytes.EqualFold(k, []byte("name")) || bytes.EqualFold(k, []byte("email")) || bytes.EqualFold(k, []byte("description"))
}

// path is the dotted path of the value being scanned.
func (s *jsonScan) path() string {
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = string(k)
	}
	return strings.Join(parts, ".")
}

// hasControl reports C0 and C1 controls (tab included), as
// surgepay.TextHasControl for bytes.
func hasControl(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// hasHidden reports controls and Unicode format characters (the
// bidirectional embeddings, overrides, isolates and marks, zero-width
// spaces and joiners, the soft hyphen), as surgepay.TextHasHidden for
// bytes.
func hasHidden(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xad && unicode.Is(unicode.Cf, r)) {
			return true
		}
	}
	return false
}

// loneSurrogate reports whether the raw JSON string contents b hold a \u
// escape of a UTF-16 surrogate that is not a high one followed at once by
// an escaped low one.
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // \\ and the other one-letter escapes
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return false // malformed: the decoder says where
		}
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return true
		case r >= 0xd800 && r <= 0xdbff:
			lo, ok := rune(0), false
			if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				lo, ok = hex4(b, i+8)
			}
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
