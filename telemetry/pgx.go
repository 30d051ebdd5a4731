package telemetry

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
)

// PgxTracer returns a pgx tracer that makes a span per query, batch,
// COPY and connect on t's tracer provider, or nil when tracing is off. Set
// it as pgxpool.Config.ConnConfig.Tracer. Query parameters are never
// recorded (they may hold sealed card data); the SQL text is. Queries a
// group-commit writer runs for a whole batch are not inside any request's
// trace and appear as traces of their own.
func (t *Telemetry) PgxTracer() pgx.QueryTracer {
	if !t.TracingEnabled() {
		return nil
	}
	// Spans are named by the statement's first word (SELECT), otelpgx's
	// default since WithTrimSQLInSpanName was deprecated.
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(t.tp), otelpgx.WithDisableConnectionDetailsInAttributes())
}
