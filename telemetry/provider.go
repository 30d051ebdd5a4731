package telemetry

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgepay/surgepay"
)

// Provider decorates a surgepay.Provider: every call gets a span
// "provider.<op>", a duration and a count by outcome (approved, declined,
// not_performed, unknown), and adds its time to the request's
// RequestStats. Requests (which carry card data) are never recorded: spans
// hold the operation, the outcome and the decline code. Safe for
// concurrent use if the wrapped provider is.
type Provider struct {
	next surgepay.Provider
	t    *Telemetry
}

var _ surgepay.Provider = (*Provider)(nil)

// WrapProvider returns p decorated with t's metrics and spans.
func (t *Telemetry) WrapProvider(p surgepay.Provider) surgepay.Provider {
	return &Provider{next: p, t: t}
}

// Unwrap returns the decorated provider.
func (p *Provider) Unwrap() surgepay.Provider { return p.next }

func (p *Provider) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "authorize")
	defer func() { done(res, err) }()
	return p.next.Authorize(ctx, req)
}

func (p *Provider) Capture(ctx context.Context, req *surgepay.CaptureRequest) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "capture")
	defer func() { done(res, err) }()
	return p.next.Capture(ctx, req)
}

func (p *Provider) Void(ctx context.Context, req *surgepay.VoidRequest) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "void")
	defer func() { done(res, err) }()
	return p.next.Void(ctx, req)
}

func (p *Provider) Refund(ctx context.Context, req *surgepay.RefundRequest) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "refund")
	defer func() { done(res, err) }()
	return p.next.Refund(ctx, req)
}

func (p *Provider) Lookup(ctx context.Context, key string) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "lookup")
	defer func() { done(res, err) }()
	return p.next.Lookup(ctx, key)
}

// start begins a call; done records it. done is called from a deferred
// closure, never deferred itself, so that a panic passing through is not
// recorded by the span (the SDK's End records a panic value verbatim when
// it is the deferred function, and a panic value may hold anything).
func (p *Provider) start(ctx context.Context, op string) (context.Context, func(*surgepay.ProviderResult, error)) {
	begin := time.Now()
	var sp trace.Span
	if p.t.TracingEnabled() {
		ctx, sp = p.t.tracer.Start(ctx, "provider."+op, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("surgepay.provider.op", op)))
	}
	return ctx, func(res *surgepay.ProviderResult, err error) {
		d := time.Since(begin)
		countProviderCall(ctx, d)
		outcome := providerOutcome(res, err)
		if p.t.MetricsEnabled() {
			p.t.m.providerCalls.WithLabelValues(op, outcome).Inc()
			p.t.m.providerSeconds.WithLabelValues(op, outcome).Observe(d.Seconds())
		}
		if sp == nil {
			return
		}
		sp.SetAttributes(attribute.String("surgepay.provider.outcome", outcome))
		if res != nil && !res.Approved {
			sp.SetAttributes(attribute.String("surgepay.decline_code", declineLabel(res.DeclineCode)))
		}
		if outcome == surgepay.NotPerformed || outcome == surgepay.Unknown {
			spanError(sp, outcome)
		}
		sp.End()
	}
}

func providerOutcome(res *surgepay.ProviderResult, err error) string {
	switch {
	case err == nil && res != nil && res.Approved:
		return "approved"
	case err == nil && res != nil && res.RequiresAction:
		return "requires_action" // 3-D Secure: neither approved nor declined yet
	case err == nil && res != nil:
		return "declined"
	case surgepay.IsNotPerformed(err):
		return surgepay.NotPerformed
	}
	return surgepay.Unknown
}

var _ surgepay.OperationLookuper = (*Provider)(nil)

// LookupOperation looks q up at the decorated provider, through its own
// LookupOperation if it has one (a processor that needs more than the
// key), and records it as a lookup.
func (p *Provider) LookupOperation(ctx context.Context, q *surgepay.LookupQuery) (res *surgepay.ProviderResult, err error) {
	ctx, done := p.start(ctx, "lookup")
	defer func() { done(res, err) }()
	return surgepay.LookupOperation(ctx, p.next, q)
}

var _ surgepay.TokenDescriber = (*Provider)(nil)

// DescribeToken passes to the decorated provider, or answers EINVALID if
// it takes no tokens.
func (p *Provider) DescribeToken(ctx context.Context, processor, token string) (*surgepay.TokenCard, error) {
	d, ok := p.next.(surgepay.TokenDescriber)
	if !ok {
		return nil, surgepay.Invalid("processor_token.processor", "invalid_value", "this processor takes no tokens")
	}
	return d.DescribeToken(ctx, processor, token)
}

var _ surgepay.TokenAttacher = (*Provider)(nil)

// AttachToken passes to the decorated provider, or attaches nothing ("")
// if it attaches no tokens.
func (p *Provider) AttachToken(ctx context.Context, processor, token, merchantID, customerID string) (string, error) {
	a, ok := p.next.(surgepay.TokenAttacher)
	if !ok {
		return "", nil
	}
	return a.AttachToken(ctx, processor, token, merchantID, customerID)
}

var _ surgepay.EventParser = (*Provider)(nil)

// ParseEvent passes to the decorated provider, or answers ENOTFOUND if it
// takes no webhooks.
func (p *Provider) ParseEvent(processor string, payload []byte, header http.Header) (*surgepay.ProcessorEvent, error) {
	ep, ok := p.next.(surgepay.EventParser)
	if !ok {
		return nil, surgepay.NotFound("processor", "processor")
	}
	return ep.ParseEvent(processor, payload, header)
}

// AcceptsEvents passes to the decorated provider (surgepay.AcceptsEvents).
func (p *Provider) AcceptsEvents(processor string) bool {
	return surgepay.AcceptsEvents(p.next, processor)
}

var _ surgepay.OutsideRefunder = (*Provider)(nil)

// RefundedOutside passes to the decorated provider; 0 if it cannot tell.
func (p *Provider) RefundedOutside(ctx context.Context, ref string) (int64, error) {
	if o, ok := p.next.(surgepay.OutsideRefunder); ok {
		return o.RefundedOutside(ctx, ref)
	}
	return 0, nil
}
