package surgepay

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrWriteInvalid is wrapped by every error of Write.Validate: a Write
// whose fields no store takes together. The engine builds Writes, so it is
// a programmer error (EINTERNAL to a client), never a client's.
var ErrWriteInvalid = errors.New("apply: invalid Write")

// Validate reports a Write whose fields the stores cannot take together,
// before any of it is stored. Every store's Apply calls it first, so that
// a Write one store refuses, every store refuses:
//   - a webhook endpoint change (WebhookEndpointInsert,
//     WebhookEndpointDelete, WebhookEndpointRoll, WebhookResend) goes
//     alone in its Write, one of them, with at most an Idempotency record
//     besides (and ProviderActed, which is no change), and a
//     WebhookResend with the audit rows of the operator who asked for it
//     (the console);
//   - a Staged record has an ID and sealed bytes;
//   - Disputes are disputes of the Write's PaymentUpdate, at most
//     DisputesPerWriteMax;
//   - audit rows and last-used times are within their bounds and complete
//     (CheckLifecycle).
//
// Limits of one store (a count of events or acknowledgements it binds in
// one statement) are its own.
func (w *Write) Validate() error {
	if err := w.validateWebhook(); err != nil {
		return err
	}
	if r := w.Staged; r != nil && (r.ID == "" || len(r.Sealed) == 0) {
		return fmt.Errorf("%w: a staged record without an ID or sealed bytes", ErrWriteInvalid)
	}
	if err := w.validateDisputes(); err != nil {
		return err
	}
	return CheckLifecycle(w)
}

// validateWebhook refuses an endpoint change with anything but an
// Idempotency record: its guard (the endpoint limit, the secret's or the
// delivery's state) is checked by its store alone, with no other guard to
// order it against. Every other field is checked, by reflection, so that a
// field added to Write is refused with one until this says otherwise.
func (w *Write) validateWebhook() error {
	changes := 0
	for _, set := range []bool{w.WebhookEndpointInsert != nil, w.WebhookEndpointDelete != nil,
		w.WebhookEndpointRoll != nil, w.WebhookResend != nil} {
		if set {
			changes++
		}
	}
	switch {
	case changes == 0:
		return nil
	case changes > 1:
		return fmt.Errorf("%w: %d webhook endpoint changes in one Write, at most one", ErrWriteInvalid, changes)
	}
	rest := *w
	rest.ProviderActed, rest.Idempotency = false, nil
	if w.WebhookResend != nil {
		// Audit rows are inserts that guard nothing: an operator's resend
		// (the console) is recorded in the resend's transaction.
		rest.Audit = nil
	}
	rest.WebhookEndpointInsert, rest.WebhookEndpointDelete, rest.WebhookEndpointRoll, rest.WebhookResend = nil, nil, nil, nil
	v := reflect.ValueOf(rest)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
			continue
		}
		return fmt.Errorf("%w: a webhook endpoint change goes alone in its Write, but for an idempotency record; this one has %s",
			ErrWriteInvalid, v.Type().Field(i).Name)
	}
	return nil
}
