package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// readBody reads a request body of at most surgepay.RequestBodyBytesMax.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, surgepay.RequestBodyBytesMax))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &surgepay.Error{Code: surgepay.EINVALID, Reason: "body_too_large", Param: "body",
			Message: fmt.Sprintf("the request body must be at most %d bytes", surgepay.RequestBodyBytesMax)}
	}
	if err != nil {
		return nil, surgepay.Invalid("body", "body_unreadable", "the request body could not be read")
	}
	return body, nil
}

// decode parses body into v strictly: unknown fields, wrong types, trailing
// data and malformed JSON are EINVALID errors naming the field. An empty
// body decodes as {}.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
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
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return surgepay.Invalid(name, "unknown_field", "unknown field %s", name)
	}
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
	case surgepay.EINVALID:
		return http.StatusBadRequest
	case surgepay.EUNAUTH:
		return http.StatusUnauthorized
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
	b, merr := json.Marshal(toJSON(v))
	if merr != nil {
		return render(nil, fmt.Errorf("marshal response: %w", merr))
	}
	return http.StatusOK, append(b, '\n')
}

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
