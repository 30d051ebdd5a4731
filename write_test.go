package surgepay

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestWriteValidate(t *testing.T) {
	ep := &WebhookEndpoint{ID: "we_1", MerchantID: "mch_1"}
	idem := &IdempotencyRecord{MerchantID: "mch_1", Key: "k"}
	audit := &AuditEvent{ID: "aud_1", Action: "a", Created: time.Now()}
	for _, tt := range []struct {
		name string
		w    *Write
		ok   bool
	}{
		{"OK", &Write{PaymentInsert: &Payment{}, Idempotency: idem, Audit: []*AuditEvent{audit}}, true},
		{"OKEndpointWithIdempotency", &Write{WebhookEndpointInsert: ep, Idempotency: idem, ProviderActed: true}, true},
		{"OKEndpointWithEmptySlices", &Write{WebhookEndpointDelete: ep, Events: []*Event{}, Audit: []*AuditEvent{}}, true},
		{"ErrEndpointWithAPIKeyRevoke", &Write{WebhookEndpointInsert: ep, APIKeyRevoke: "key_1"}, false},
		{"ErrEndpointWithAudit", &Write{WebhookEndpointRoll: &WebhookEndpointRoll{}, Audit: []*AuditEvent{audit}}, false},
		{"OKResendWithAudit", &Write{WebhookResend: &WebhookResend{}, Audit: []*AuditEvent{audit}}, true},
		{"ErrEndpointWithAnalytics", &Write{WebhookResend: &WebhookResend{}, Analytics: []AnalyticsDelta{{}}}, false},
		{"ErrTwoEndpointChanges", &Write{WebhookEndpointInsert: ep, WebhookResend: &WebhookResend{}}, false},
		{"ErrStagedWithoutSealed", &Write{Staged: &StagedRecord{ID: "stg_1"}}, false},
		{"ErrAuditIncomplete", &Write{Audit: []*AuditEvent{{ID: "aud_2"}}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.w.Validate()
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrWriteInvalid) {
				t.Fatalf("Validate() = %v, want ok %v (ErrWriteInvalid otherwise)", err, tt.ok)
			}
		})
	}
}

// TestErrorIs: a guard sentinel matches the store's error of its code and
// reason, wrapped or not, whatever the message; nothing else.
func TestErrorIs(t *testing.T) {
	exists := fmt.Errorf("sqlite: commit: %w", &Error{Code: ECONFLICT, Reason: ReasonIdempotencyKeyExists,
		Param: "Idempotency-Key", Message: "a request with this Idempotency-Key has already been stored"})
	for _, tt := range []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"KeyExists", exists, ErrIdempotencyKeyExists, true},
		{"KeyExistsNotConcurrent", exists, ErrConcurrentUpdate, false},
		{"ConcurrentUpdate", Conflict(ReasonConcurrentUpdate, "changed"), ErrConcurrentUpdate, true},
		{"OtherCode", &Error{Code: EINVALID, Reason: ReasonConcurrentUpdate}, ErrConcurrentUpdate, false},
		{"NoReason", Errorf(ECONFLICT, "x"), &Error{Code: ECONFLICT}, false},
		{"Plain", errors.New(ReasonIdempotencyKeyExists), ErrIdempotencyKeyExists, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Fatalf("errors.Is(%v, %v) = %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
}
