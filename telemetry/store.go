package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgepay/surgepay"
)

// Store decorates a surgepay.Store with a span "store.<Method>" per call,
// a child of the request's span. Calls outside a recorded trace (the
// reconciler, the purge loop, unsampled requests) cost one context lookup
// and make no span. Arguments are not recorded, except counts. Safe for
// concurrent use if the wrapped store is.
//
// A store with the surgepay.StagedStore capability keeps it: WrapStore then
// returns a *StagedStore.
type Store struct {
	next   surgepay.Store
	tracer trace.Tracer
}

var _ surgepay.Store = (*Store)(nil)

// StagedStore is a Store whose wrapped store has the StagedStore capability.
type StagedStore struct {
	*Store
	staged surgepay.StagedStore
}

var _ surgepay.StagedStore = (*StagedStore)(nil)

// WrapStore returns s decorated with spans, or s itself when tracing is off.
func (t *Telemetry) WrapStore(s surgepay.Store) surgepay.Store {
	if !t.TracingEnabled() {
		return s
	}
	w := &Store{next: s, tracer: t.tracer}
	if st, ok := s.(surgepay.StagedStore); ok {
		return &StagedStore{Store: w, staged: st}
	}
	return w
}

// Unwrap returns the decorated store, for its own methods (CommitStats...).
func (s *Store) Unwrap() surgepay.Store { return s.next }

// span starts a child span if ctx is in a recorded trace. end is called
// from a deferred closure, never deferred itself: see Provider.start.
func (s *Store) span(ctx context.Context, method string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, func(error) {}
	}
	ctx, sp := s.tracer.Start(ctx, "store."+method, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			code := surgepay.ErrorCode(err)
			sp.SetAttributes(attribute.String("surgepay.error_code", code))
			if code == surgepay.EINTERNAL || code == surgepay.EUNAVAILABLE {
				spanError(sp, code)
			}
		}
		sp.End()
	}
}

func (s *Store) FindMerchant(ctx context.Context, id string) (v *surgepay.Merchant, err error) {
	ctx, end := s.span(ctx, "FindMerchant")
	defer func() { end(err) }()
	return s.next.FindMerchant(ctx, id)
}

func (s *Store) ListMerchants(ctx context.Context) (v []*surgepay.Merchant, err error) {
	ctx, end := s.span(ctx, "ListMerchants")
	defer func() { end(err) }()
	return s.next.ListMerchants(ctx)
}

func (s *Store) FindAPIKeyByHash(ctx context.Context, hash []byte) (v *surgepay.APIKey, err error) {
	ctx, end := s.span(ctx, "FindAPIKeyByHash")
	defer func() { end(err) }()
	return s.next.FindAPIKeyByHash(ctx, hash)
}

func (s *Store) ListAPIKeys(ctx context.Context) (v []*surgepay.APIKey, err error) {
	ctx, end := s.span(ctx, "ListAPIKeys")
	defer func() { end(err) }()
	return s.next.ListAPIKeys(ctx)
}

func (s *Store) ListAuditEvents(ctx context.Context, f surgepay.AuditFilter) (v []*surgepay.AuditEvent, more bool, err error) {
	ctx, end := s.span(ctx, "ListAuditEvents")
	defer func() { end(err) }()
	return s.next.ListAuditEvents(ctx, f)
}

func (s *Store) FindCustomer(ctx context.Context, merchantID, id string) (v *surgepay.Customer, err error) {
	ctx, end := s.span(ctx, "FindCustomer")
	defer func() { end(err) }()
	return s.next.FindCustomer(ctx, merchantID, id)
}

func (s *Store) ListCustomers(ctx context.Context, merchantID string, page surgepay.Page) (v []*surgepay.Customer, more bool, err error) {
	ctx, end := s.span(ctx, "ListCustomers", attribute.Int("surgepay.page.limit", page.Limit))
	defer func() { end(err) }()
	return s.next.ListCustomers(ctx, merchantID, page)
}

func (s *Store) FindPaymentMethod(ctx context.Context, merchantID, id string) (v *surgepay.PaymentMethod, err error) {
	ctx, end := s.span(ctx, "FindPaymentMethod")
	defer func() { end(err) }()
	return s.next.FindPaymentMethod(ctx, merchantID, id)
}

func (s *Store) ListPaymentMethods(ctx context.Context, merchantID, customerID string, page surgepay.Page) (v []*surgepay.PaymentMethod, more bool, err error) {
	ctx, end := s.span(ctx, "ListPaymentMethods", attribute.Int("surgepay.page.limit", page.Limit))
	defer func() { end(err) }()
	return s.next.ListPaymentMethods(ctx, merchantID, customerID, page)
}

func (s *Store) ListRecentPaymentMethods(ctx context.Context, merchantID, beforeID string, limit int) (v []*surgepay.PaymentMethod, err error) {
	ctx, end := s.span(ctx, "ListRecentPaymentMethods", attribute.Int("surgepay.page.limit", limit))
	defer func() { end(err) }()
	return s.next.ListRecentPaymentMethods(ctx, merchantID, beforeID, limit)
}

func (s *Store) ListAnalytics(ctx context.Context, merchantID string, q surgepay.AnalyticsQuery) (v []*surgepay.AnalyticsDay, err error) {
	ctx, end := s.span(ctx, "ListAnalytics")
	defer func() { end(err) }()
	return s.next.ListAnalytics(ctx, merchantID, q)
}

func (s *Store) FindPayment(ctx context.Context, merchantID, id string) (v *surgepay.Payment, err error) {
	ctx, end := s.span(ctx, "FindPayment")
	defer func() { end(err) }()
	return s.next.FindPayment(ctx, merchantID, id)
}

// FindPaymentByRef passes to the decorated store if it has the capability.
func (s *Store) FindPaymentByRef(ctx context.Context, ref string) (v *surgepay.Payment, err error) {
	f, ok := s.next.(surgepay.PaymentByRefFinder)
	if !ok {
		return nil, surgepay.NotFound("reference", "payment")
	}
	ctx, end := s.span(ctx, "FindPaymentByRef")
	defer func() { end(err) }()
	return f.FindPaymentByRef(ctx, ref)
}

func (s *Store) ListPayments(ctx context.Context, merchantID string, f surgepay.PaymentFilter) (v []*surgepay.Payment, more bool, err error) {
	ctx, end := s.span(ctx, "ListPayments", attribute.Int("surgepay.page.limit", f.Limit))
	defer func() { end(err) }()
	return s.next.ListPayments(ctx, merchantID, f)
}

func (s *Store) ListProcessing(ctx context.Context, limit int, actionsAfter string) (v []*surgepay.Payment, err error) {
	ctx, end := s.span(ctx, "ListProcessing", attribute.Int("surgepay.page.limit", limit))
	defer func() { end(err) }()
	return s.next.ListProcessing(ctx, limit, actionsAfter)
}

func (s *Store) ListEvents(ctx context.Context, merchantID, paymentID string) (v []*surgepay.Event, err error) {
	ctx, end := s.span(ctx, "ListEvents")
	defer func() { end(err) }()
	return s.next.ListEvents(ctx, merchantID, paymentID)
}

func (s *Store) FindIdempotency(ctx context.Context, merchantID, key string) (v *surgepay.IdempotencyRecord, err error) {
	ctx, end := s.span(ctx, "FindIdempotency")
	defer func() { end(err) }()
	return s.next.FindIdempotency(ctx, merchantID, key)
}

func (s *Store) DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (n int, err error) {
	ctx, end := s.span(ctx, "DeleteIdempotencyBefore", attribute.Int("surgepay.page.limit", limit))
	defer func() { end(err) }()
	return s.next.DeleteIdempotencyBefore(ctx, t, limit)
}

// Apply's span covers the wait in the group-commit queue and the commit.
func (s *Store) Apply(ctx context.Context, w *surgepay.Write) (err error) {
	ctx, end := s.span(ctx, "Apply", attribute.Int("surgepay.write.events", len(w.Events)),
		attribute.Bool("surgepay.write.staged", w.Staged != nil))
	defer func() { end(err) }()
	return s.next.Apply(ctx, w)
}

func (s *Store) Close() error { return s.next.Close() }

func (s *StagedStore) FetchStaged(ctx context.Context, afterID string, limit int) (v []*surgepay.StagedRecord, err error) {
	ctx, end := s.span(ctx, "FetchStaged", attribute.Int("surgepay.page.limit", limit))
	defer func() { end(err) }()
	return s.staged.FetchStaged(ctx, afterID, limit)
}

func (s *StagedStore) StagedBacklog(ctx context.Context) (n int, oldest time.Time, err error) {
	ctx, end := s.span(ctx, "StagedBacklog")
	defer func() { end(err) }()
	return s.staged.StagedBacklog(ctx)
}
