package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256>": the HMAC,
	// keyed with the endpoint's secret (the whole "whsec_…" string), of
	// "<t>.<body>". During the overlap window of a rolled secret it holds
	// two v1 values: "t=…,v1=<new secret's>,v1=<old secret's>".
	HeaderSignature = "Surgepay-Signature"
	// HeaderEventID is the event's ID, the same on every attempt and for
	// every endpoint: receivers de-duplicate on it.
	HeaderEventID = "Surgepay-Event-Id"
	// HeaderEventType is the event's type, e.g. payment.succeeded.
	HeaderEventType = "Surgepay-Event-Type"
	// HeaderAttempt is the attempt's number, 1 for the first.
	HeaderAttempt = "Surgepay-Delivery-Attempt"
)

// Signature returns the Surgepay-Signature header of body sent at t: one
// v1 value per secret, in order (the current secret first, then, during
// the overlap of a roll, the previous one), as Stripe does. A receiver
// accepts the request if any v1 value matches its secret.
func Signature(t time.Time, body []byte, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		b.WriteString(",v1=" + hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrSignatureMalformed = errors.New("webhook: malformed Surgepay-Signature header")
	ErrSignatureMismatch  = errors.New("webhook: no v1 signature matches")
	ErrSignatureExpired   = errors.New("webhook: signature timestamp outside the tolerance")
)

// Verify checks a Surgepay-Signature header against body and secret, and
// that its timestamp is within tolerance of now (a replayed old request is
// refused). Any of several v1 values may match. It is what a receiver
// written in Go calls; docs/webhooks.md shows the same in a few lines.
func Verify(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureMalformed
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil {
				return ErrSignatureMalformed
			}
			sigs = append(sigs, b)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrSignatureMalformed
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrSignatureMismatch
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	return nil
}
