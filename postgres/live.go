package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	livewatch "github.com/surgepay/surgepay/internal/liveness"
	"github.com/surgepay/surgepay/internal/statelog"
)

// A database that stops answering while its connections stay open (a
// stopped process, a host that froze, a network that drops packets) gives
// no error: a statement waits for an answer that does not come, for as
// long as the operating system keeps the connection (minutes). Neither
// the pool nor TCP notices. So a DB watches its database: a probe on a
// connection of its own (not the pool's, so that a busy pool is not
// taken for a hung server) pings it every HungAfter/4, and a ping not
// answered within 3/4 of HungAfter, or a connection that cannot be made
// in that time, marks the database down. A hang is thus known within
// HungAfter of its start. While the database is down:
//
//   - every statement fails at once with EUNAVAILABLE store_unavailable
//     (503 with Retry-After), without touching the pool;
//   - the statements in flight when it went down are cancelled (pgx
//     closes their connections), so their callers get the same answer, or
//     commit_outcome_unknown for a batch whose COMMIT was in flight;
//   - the probe goes on, and the first ping answered marks it up again,
//     after the pool is reset: its connections may lead to a server that
//     is no longer the primary (see DSN's target_session_attrs).
//
// The change of state is logged once each way, with how many statements
// were refused meanwhile (package statelog), not once a request.

// errDatabaseDown is the cause of a statement refused or cancelled
// because the watch found the database down. It is unreachable (readErr).
var errDatabaseDown = errors.New("postgres: the database did not answer its liveness probe")

// HungAfterDefault is Config.HungAfter's default: how long a database may
// leave a ping unanswered before it is taken as down.
const HungAfterDefault = time.Second

// liveness is the watch's verdict (package liveness), with the database's
// changes of state logged once each way (package statelog).
type liveness struct {
	w     *livewatch.Watch
	track *statelog.Tracker
}

func newLiveness(log *slog.Logger, onUp func()) *liveness {
	l := &liveness{track: statelog.New(log, "PostgreSQL")}
	l.w = livewatch.New(errDatabaseDown, func(err error) { l.track.Fail(err) }, func() {
		l.track.OK()
		if onUp != nil {
			onUp()
		}
	})
	return l
}

// bound returns a context for one statement (or one transaction) under
// ctx that is also cancelled when the database goes down, and the func
// that releases it. While the database is down it returns an error
// instead, at once (counted in the line logged when it is back).
func (l *liveness) bound(ctx context.Context) (context.Context, func(), error) {
	if l.w.Down() {
		l.track.Fail(errDatabaseDown)
		return nil, nil, fmt.Errorf("%w (down since the last probe)", errDatabaseDown)
	}
	c, done := l.w.Bound(ctx)
	return c, done, nil
}

// wrap returns err, marked as errDatabaseDown if the statement failed
// because the watch cancelled it, so that readErr answers 503.
func wrap(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errDatabaseDown) && !errors.Is(err, errDatabaseDown) {
		return fmt.Errorf("%w: %w", errDatabaseDown, err)
	}
	return err
}

// watch probes the database on a connection of its own until ctx ends;
// see the comment at the top.
func (db *DB) watch(ctx context.Context, cfg *pgx.ConnConfig, hungAfter time.Duration) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	db.live.w.Run(ctx, hungAfter, func(ctx context.Context) error {
		if conn == nil || conn.IsClosed() {
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			conn = c
		}
		if err := conn.Ping(ctx); err != nil {
			_ = conn.Close(context.Background())
			conn = nil
			return err
		}
		return nil
	})
}

// livePool is the pool as the store uses it: every statement runs under
// the liveness bound.
type livePool struct {
	pool *pgxpool.Pool
	live *liveness
}

func (p *livePool) Close() { p.pool.Close() }

func (p *livePool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	// The caller (commitOps) bounds ctx itself.
	return p.pool.Acquire(ctx)
}

func (p *livePool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, done, err := p.live.bound(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer done()
	tag, err := p.pool.Exec(c, sql, args...)
	return tag, wrap(c, err)
}

func (p *livePool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, done, err := p.live.bound(ctx)
	if err != nil {
		return errRows{err: err}, err
	}
	rows, err := p.pool.Query(c, sql, args...)
	if err != nil {
		done()
		return errRows{err: wrap(c, err)}, wrap(c, err)
	}
	return &liveRows{Rows: rows, ctx: c, done: done}, nil
}

func (p *livePool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return liveRow{p: p, ctx: ctx, sql: sql, args: args}
}

func (p *livePool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, done, err := p.live.bound(ctx)
	if err != nil {
		return errBatch{err: err}
	}
	return &liveBatch{BatchResults: p.pool.SendBatch(c, b), ctx: c, done: done}
}

// liveRow runs its statement when scanned, as pgx's rows do.
type liveRow struct {
	p    *livePool
	ctx  context.Context
	sql  string
	args []any
}

func (r liveRow) Scan(dest ...any) error {
	c, done, err := r.p.live.bound(r.ctx)
	if err != nil {
		return err
	}
	defer done()
	return wrap(c, r.p.pool.QueryRow(c, r.sql, r.args...).Scan(dest...))
}

// liveRows releases its bound when closed. Every caller closes its rows
// (collect does).
type liveRows struct {
	pgx.Rows
	ctx  context.Context
	done func()
	once sync.Once
}

func (r *liveRows) Close() {
	r.Rows.Close()
	r.once.Do(r.done)
}

func (r *liveRows) Err() error { return wrap(r.ctx, r.Rows.Err()) }

type liveBatch struct {
	pgx.BatchResults
	ctx  context.Context
	done func()
	once sync.Once
}

func (b *liveBatch) Close() error {
	err := b.BatchResults.Close()
	b.once.Do(b.done)
	return wrap(b.ctx, err)
}

// errRows is the rows of a statement that was never sent.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (r errRows) Err() error                                 { return r.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                          { return r.err }
func (r errRows) Values() ([]any, error)                     { return nil, r.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }

// errBatch is the results of a batch that was never sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return errRows(b), b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRows(b) }
func (b errBatch) Close() error                     { return b.err }
func (errBatch) Tx() pgx.Tx                         { return nil }
