package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Export timing.
const (
	exportInterval   = time.Second      // a partial batch waits at most this long
	exportTimeoutMax = 10 * time.Second // one OTLP request
)

func newOTLPExporter(cfg TracingConfig) (sdktrace.SpanExporter, error) {
	return otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(cfg.Endpoint),
		otlptracehttp.WithTimeout(exportTimeoutMax))
}

func newTracerProvider(cfg TracingConfig, exp sdktrace.SpanExporter, m *metrics, service string) *sdktrace.TracerProvider {
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service))
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(newBoundedProcessor(exp, cfg.QueueSizeMax, m)),
	)
}

// boundedProcessor batches finished spans to an exporter through a queue
// of fixed size. OnEnd never blocks: when the queue is full the span is
// dropped and counted. Spans are scrubbed of card-number-like digit runs
// (see Redact) on the export goroutine, off the request path.
type boundedProcessor struct {
	exp   sdktrace.SpanExporter
	queue chan sdktrace.ReadOnlySpan
	m     *metrics // nil: not counted
	flush chan chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

var _ sdktrace.SpanProcessor = (*boundedProcessor)(nil)

func newBoundedProcessor(exp sdktrace.SpanExporter, queueSizeMax int, m *metrics) *boundedProcessor {
	p := &boundedProcessor{exp: exp, queue: make(chan sdktrace.ReadOnlySpan, queueSizeMax), m: m,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *boundedProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case p.queue <- s:
	default:
		if p.m != nil {
			p.m.spansDropped.Inc()
		}
	}
}

func (p *boundedProcessor) run() {
	defer close(p.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, ExportBatchSizeMax)
	t := time.NewTicker(exportInterval)
	defer t.Stop()
	send := func() {
		if len(batch) > 0 {
			p.export(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case s := <-p.queue:
			if batch = append(batch, s); len(batch) == ExportBatchSizeMax {
				send()
			}
		case <-t.C:
			send()
		case ack := <-p.flush:
			batch = p.drain(batch)
			send()
			close(ack)
		case <-p.stop:
			batch = p.drain(batch)
			send()
			return
		}
	}
}

// drain moves what is queued into batch, exporting full batches.
func (p *boundedProcessor) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-p.queue:
			if batch = append(batch, s); len(batch) == ExportBatchSizeMax {
				p.export(batch)
				batch = batch[:0]
			}
		default:
			return batch
		}
	}
}

func (p *boundedProcessor) export(batch []sdktrace.ReadOnlySpan) {
	clean := make([]sdktrace.ReadOnlySpan, len(batch))
	for i, s := range batch {
		clean[i] = scrubSpan(s)
		if clean[i] != s && p.m != nil {
			p.m.spansRedacted.Inc()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), exportTimeoutMax)
	defer cancel()
	err := p.exp.ExportSpans(ctx, clean)
	if p.m != nil {
		if err != nil {
			p.m.spanExportFails.Inc()
		} else {
			p.m.spansExported.Add(float64(len(clean)))
		}
	}
}

func (p *boundedProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case p.flush <- ack:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *boundedProcessor) Shutdown(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.exp.Shutdown(ctx)
}

// scrubSpan returns s, or a copy with every string that may hold a card
// number passed through Redact.
func scrubSpan(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	if !spanMayHoldPAN(s) {
		return s
	}
	st := tracetest.SpanStubFromReadOnlySpan(s)
	st.Name = Redact(st.Name)
	st.Status.Description = Redact(st.Status.Description)
	st.Attributes = scrubAttrs(st.Attributes)
	for i := range st.Events {
		st.Events[i].Name = Redact(st.Events[i].Name)
		st.Events[i].Attributes = scrubAttrs(st.Events[i].Attributes)
	}
	for i := range st.Links {
		st.Links[i].Attributes = scrubAttrs(st.Links[i].Attributes)
	}
	return st.Snapshot()
}

func spanMayHoldPAN(s sdktrace.ReadOnlySpan) bool {
	if mayHoldPAN(s.Name()) || mayHoldPAN(s.Status().Description) || attrsMayHoldPAN(s.Attributes()) {
		return true
	}
	for _, e := range s.Events() {
		if mayHoldPAN(e.Name) || attrsMayHoldPAN(e.Attributes) {
			return true
		}
	}
	for _, l := range s.Links() {
		if attrsMayHoldPAN(l.Attributes) {
			return true
		}
	}
	return false
}

func attrsMayHoldPAN(as []attribute.KeyValue) bool {
	for _, a := range as {
		if mayHoldPAN(string(a.Key)) || mayHoldPAN(a.Value.String()) {
			return true
		}
	}
	return false
}

func scrubAttrs(as []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(as))
	for i, a := range as {
		switch a.Value.Type() {
		case attribute.STRING:
			out[i] = attribute.String(Redact(string(a.Key)), Redact(a.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := a.Value.AsStringSlice()
			for j := range ss {
				ss[j] = Redact(ss[j])
			}
			out[i] = attribute.StringSlice(Redact(string(a.Key)), ss)
		default: // numbers: a card number as an integer is still a card number
			if mayHoldPAN(a.Value.String()) {
				out[i] = attribute.String(Redact(string(a.Key)), Redacted)
			} else {
				out[i] = attribute.KeyValue{Key: attribute.Key(Redact(string(a.Key))), Value: a.Value}
			}
		}
	}
	return out
}

// spanError marks span failed with a code, never a message: error messages
// may quote client input.
func spanError(sp interface {
	SetStatus(codes.Code, string)
	SetAttributes(...attribute.KeyValue)
}, code string) {
	sp.SetStatus(codes.Error, code)
	sp.SetAttributes(attribute.String("error.type", code))
}
