package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// Apply stores w atomically and returns once it is durable; see
// surgepay.Store. It queues w for a group committer and waits.
//
// A batch is one transaction, pipelined in rounds (one round trip each):
//
//  1. BEGIN, and the first guard of every Write: its idempotency insert
//     (INSERT ... ON CONFLICT DO NOTHING) or else its row guard (UPDATE or
//     DELETE ... WHERE version = $n). No guard statement errors when it
//     fails: it affects no row.
//  2. The row guard of every Write whose idempotency insert held.
//  3. For each Write whose guards all held, its inserts (the events as one
//     multi-row INSERT); for each whose row guard failed after its
//     idempotency insert held, a DELETE of that idempotency row, and a
//     SELECT telling a missing row (ENOTFOUND) from a stale one
//     (ECONFLICT); then COMMIT.
//
// A batch of inserts only is one round trip; of purchases, two; of
// updates, three. A sale (see newSaleOp) is one statement whose
// idempotency guard needs no round of its own when the sale has no
// events: it runs in round 3, so a batch of such sales is one round trip.
// The rare Write with more than one row guard runs between rounds 2 and 3
// under a savepoint, one round trip each. Guard statements within a round
// are sorted by row, so that concurrent batches lock rows in one order.
//
// If the batch fails before COMMIT (a deadlock, a bad value, a broken
// connection), nothing of it is stored and each Write is retried alone in
// its own transaction, so one bad Write cannot fail its neighbours.
func (db *DB) Apply(ctx context.Context, w *surgepay.Write) error {
	if w == nil {
		return errors.New("postgres: Apply of a nil Write")
	}
	start := time.Now()
	var err error
	if w.ProviderActed {
		err = db.committer.SubmitWait(ctx, w)
	} else {
		err = db.committer.Submit(ctx, w)
	}
	surgepay.CountStoreTime(ctx, time.Since(start))
	switch {
	case errors.Is(err, groupcommit.ErrQueueFull):
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "write_queue_full", RetryAfter: 1,
			Message: "the store is busy; retry shortly"}
	case errors.Is(err, groupcommit.ErrClosed):
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_closed", RetryAfter: 1,
			Message: "the store is shutting down; retry shortly"}
	}
	return err
}

// stmt is one SQL statement of a Write.
type stmt struct {
	sql  string
	args []any
	kind int // surgepay.StmtInsert, ...
}

// guard is a statement that affects one row if the guard holds and none if
// it fails.
type guard struct {
	stmt
	lockKey string // orders the guards of a round
	fail    error  // the error if it fails
	// exists, if set, is a SELECT EXISTS run when the guard fails: if the
	// row is gone, the error is ENOTFOUND instead of fail.
	exists stmt
	object string // "customer", "payment", ...
}

// op is one Write's progress through a batch.
type op struct {
	item    *groupcommit.Item[*surgepay.Write]
	guards  []guard // in the order Store.Write checks them
	inserts []stmt  // run if every guard held
	idem    bool    // guards[0] is the idempotency insert
	// last reports that o's one guard is its only statement and stores
	// nothing if it fails (a sale without events, see newSaleOp): it
	// runs in the last round, with COMMIT, not in a guard round.
	last bool

	held   int    // guards held so far
	failed *guard // the first guard that failed
	err    error
}

func (o *op) reset() { o.held, o.failed, o.err = 0, nil, nil }

// simple reports whether o has at most one row guard, so that it runs in
// rounds with no savepoint: only its idempotency row can need undoing.
func (o *op) simple() bool {
	if o.idem {
		return len(o.guards) <= 2
	}
	return len(o.guards) <= 1
}

// commit is the groupcommit.CommitFunc.
func (db *DB) commit(items []*groupcommit.Item[*surgepay.Write]) error {
	ops := make([]*op, 0, len(items))
	for _, it := range items {
		o, err := newOp(it)
		if err != nil {
			it.Err = err
			continue
		}
		ops = append(ops, o)
	}
	if len(ops) == 0 {
		return nil
	}
	if len(ops) > 1 {
		unknown, err := db.commitOps(ops)
		if err == nil || unknown {
			for _, o := range ops {
				if err != nil && o.failed == nil {
					o.err = outcomeUnknown(err)
				}
				o.item.Err = o.err
			}
			return nil
		}
	}
	// The batch failed before COMMIT, so nothing of it is stored: retry
	// each Write alone. Once the database is unreachable, stop trying.
	var down error
	for _, o := range ops {
		if down != nil {
			o.item.Err = down
			continue
		}
		var unreachable bool
		unreachable, o.item.Err = db.commitAlone(o)
		if unreachable {
			down = o.item.Err
		}
	}
	return nil
}

// commitAlone commits o in a transaction of its own and returns the
// Write's error. It retries deadlocks, serialization failures and broken
// connections, up to soloAttemptsMax attempts in all. unreachable reports
// that the database did not answer, so that the caller stops trying.
func (db *DB) commitAlone(o *op) (unreachable bool, err error) {
	for attempt := 1; ; attempt++ {
		o.reset()
		unknown, err := db.commitOps([]*op{o})
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return false, o.err
		case unknown:
			return false, outcomeUnknown(err)
		case readOnly(err):
			// Connected to a standby, or to a primary since demoted: the
			// pool leads elsewhere after its reset (see live.go).
			db.pool.pool.Reset()
			return true, fmt.Errorf("%w: %w", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable",
				RetryAfter: 1, Message: "the database is not the primary; retry shortly"}, err)
		case statementError(err):
			if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") && attempt < soloAttemptsMax {
				continue // deadlock_detected, serialization_failure
			}
			return false, fmt.Errorf("postgres: apply: %w", err)
		case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errDatabaseDown) ||
			attempt >= soloAttemptsMax:
			// A hung database gets no second wait: it would only hold the callers longer.
			return true, fmt.Errorf("%w: %w", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable",
				RetryAfter: 1, Message: "the database is unavailable; retry shortly"}, err)
		}
	}
}

func outcomeUnknown(err error) error {
	return fmt.Errorf("%w: %w", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "commit_outcome_unknown",
		RetryAfter: 1, Message: "the connection to the database broke during commit; " +
			"the write may or may not be stored"}, err)
}

// commitOps runs ops in one transaction, setting each op's err for failed
// guards. It returns an error if the transaction failed; unknown reports
// that the failure came while COMMIT was in flight, so that the
// transaction may have committed.
func (db *DB) commitOps(ops []*op) (unknown bool, err error) {
	tctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	ctx, done, err := db.live.bound(tctx)
	if err != nil {
		return false, err
	}
	defer done()
	defer func() { err = wrap(ctx, err) }()
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	defer func() {
		conn := pc.Conn()
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			// Best effort: if it fails the pool destroys the connection.
			_, _ = conn.Exec(ctx, "ROLLBACK")
		}
		pc.Release()
	}()
	t := &txn{ctx: ctx, conn: pc.Conn(), control: []string{"BEGIN"}}
	var simple, rest []*op
	for _, o := range ops {
		if o.simple() {
			simple = append(simple, o)
		} else {
			rest = append(rest, o)
		}
	}
	if err := t.guardRounds(simple); err != nil {
		return false, err
	}
	for _, o := range rest {
		if err := t.guardSavepoint(o); err != nil {
			return false, err
		}
	}
	err = t.finish(ops)
	if err == nil {
		return false, nil
	}
	return !statementError(err) && !pgconn.SafeToRetry(err), err
}

// statementError reports whether err is the refusal of a statement on a
// working connection, so that the transaction surely did not commit: an
// argument that failed to encode, or an ERROR from the server. A FATAL
// error (the backend was terminated) or a connection exception is not: it
// is a broken connection.
func statementError(err error) bool {
	var pe *pgconn.PgError
	var pre pgx.ErrPreprocessingBatch
	switch {
	case errors.As(err, &pre):
		return true
	case errors.As(err, &pe):
		return pe.Severity == "ERROR" && !strings.HasPrefix(pe.Code, "08")
	}
	return false
}

// txn is a transaction run as pipelined rounds on one connection.
type txn struct {
	ctx     context.Context
	conn    *pgx.Conn
	control []string // transaction control to send ahead of the next round
}

// queued is one statement of a round and the reader of its one result.
type queued struct {
	sql  string
	args []any
	read func(pgx.BatchResults) error
}

// round sends the pending transaction control and qs in one pipeline and
// reads every result in order.
func (t *txn) round(qs []queued) error {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(t.control)+len(qs))}
	for _, c := range t.control {
		b.Queue(c)
	}
	for _, q := range qs {
		b.Queue(q.sql, q.args...)
	}
	br := t.conn.SendBatch(t.ctx, b)
	err := func() error {
		for _, c := range t.control {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
		}
		for _, q := range qs {
			if err := q.read(br); err != nil {
				return err
			}
		}
		return nil
	}()
	t.control = t.control[:0]
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// guardRounds runs the guards of simple ops, one guard per op per round,
// so that an op's row guard runs only if its idempotency insert held.
func (t *txn) guardRounds(ops []*op) error {
	for {
		var qs []queued
		var keys []string
		for _, o := range ops {
			if o.last || o.failed != nil || o.held == len(o.guards) {
				continue
			}
			qs = append(qs, o.guardQuery(&o.guards[o.held]))
			keys = append(keys, o.guards[o.held].lockKey)
		}
		if len(qs) == 0 {
			return nil
		}
		sort.Stable(byKey{qs, keys})
		if err := t.round(qs); err != nil {
			return err
		}
	}
}

// guardQuery queues g, counted on o's request, and its result's reader.
func (o *op) guardQuery(g *guard) queued {
	surgepay.CountStatement(o.item.Ctx, g.kind)
	return queued{sql: g.sql, args: g.args, read: func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("guard %q: %w", g.sql, err)
		}
		switch {
		case o.failed != nil:
		case tag.RowsAffected() == 1:
			o.held++
		default:
			o.failed = g
			o.err = g.fail
		}
		return nil
	}}
}

// guardSavepoint runs every guard of o in one round under a savepoint, and
// rolls back to it in the next round if one failed.
func (t *txn) guardSavepoint(o *op) error {
	t.control = append(t.control, "SAVEPOINT w")
	qs := make([]queued, len(o.guards))
	for i := range o.guards {
		qs[i] = o.guardQuery(&o.guards[i])
	}
	if err := t.round(qs); err != nil {
		return err
	}
	if o.failed != nil {
		t.control = append(t.control, "ROLLBACK TO SAVEPOINT w")
		o.held = 0 // nothing to undo by hand
	}
	t.control = append(t.control, "RELEASE SAVEPOINT w")
	return nil
}

// finish runs the last round: the guards of ops that run last, inserts of
// ops whose guards held, repairs of ops whose guards failed, the batch's
// analytics upsert, and COMMIT.
func (t *txn) finish(ops []*op) error {
	var qs []queued
	var keys []string
	for _, o := range ops {
		if o.last {
			qs = append(qs, o.guardQuery(&o.guards[0]))
			keys = append(keys, o.guards[0].lockKey)
		}
	}
	sort.Stable(byKey{qs, keys})
	for _, o := range ops {
		if o.last {
			continue
		}
		if o.failed == nil {
			for _, s := range o.inserts {
				surgepay.CountStatement(o.item.Ctx, s.kind)
				qs = append(qs, queued{sql: s.sql, args: s.args, read: readExec(s.sql)})
			}
			continue
		}
		if o.idem && o.held > 0 {
			// The idempotency row is this Write's own: it inserted it.
			g := &o.guards[0]
			surgepay.CountStatement(o.item.Ctx, surgepay.StmtDelete)
			qs = append(qs, queued{sql: "DELETE FROM idempotency WHERE merchant_id = $1 AND key = $2",
				args: g.args[:2], read: readExec("undo idempotency insert")})
		}
		if o.failed.exists.sql != "" {
			qs = append(qs, o.existsQuery())
		}
	}
	if q, ok := t.analyticsQuery(ops); ok { // after every sale of the round: see analytics.go
		qs = append(qs, q)
	}
	if q, ok := credentialsQuery(ops); ok { // last: see sqlCredentialsBump
		qs = append(qs, q)
	}
	qs = append(qs, queued{sql: "COMMIT", read: func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("COMMIT answered %q", tag.String())
		}
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}})
	return t.round(qs)
}

// sqlCredentialsBump raises the credentials generation
// (surgepay.CredentialsGenerationReader) once for a batch's Writes that
// change the standing of API keys. It is the batch's last statement before
// COMMIT: a transaction waiting for the row's lock may hold other locks,
// but the one holding it has taken every lock it will, so nodes changing
// keys at once cannot deadlock on it.
//
//nolint:gosec // G101: an SQL statement, not a credential
const sqlCredentialsBump = `UPDATE credentials_generation SET generation = generation + 1`

// credentialsQuery returns the batch's bump, counted on the request of
// every op it runs for, and false if no op whose guards held changes
// credentials.
func credentialsQuery(ops []*op) (queued, bool) {
	n := 0
	for _, o := range ops {
		if !o.last && o.failed == nil && o.item.Value.ChangesCredentials() {
			surgepay.CountStatement(o.item.Ctx, surgepay.StmtUpdate)
			n++
		}
	}
	if n == 0 {
		return queued{}, false
	}
	return queued{sql: sqlCredentialsBump, read: readExec("raise the credentials generation")}, true
}

// existsQuery asks whether the row of o's failed guard exists, to tell a
// stale version (ECONFLICT) from a missing row (ENOTFOUND).
func (o *op) existsQuery() queued {
	g := o.failed
	surgepay.CountStatement(o.item.Ctx, surgepay.StmtSelect)
	return queued{sql: g.exists.sql, args: g.exists.args, read: func(br pgx.BatchResults) error {
		var exists bool
		if err := br.QueryRow().Scan(&exists); err != nil {
			return fmt.Errorf("check %s exists: %w", g.object, err)
		}
		if !exists {
			o.err = surgepay.NotFound("id", g.object)
		}
		return nil
	}}
}

func readExec(what string) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// byKey sorts a round's queries by lock key, keeping batch order for ties.
type byKey struct {
	qs   []queued
	keys []string
}

func (s byKey) Len() int           { return len(s.qs) }
func (s byKey) Less(i, j int) bool { return s.keys[i] < s.keys[j] }
func (s byKey) Swap(i, j int) {
	s.qs[i], s.qs[j] = s.qs[j], s.qs[i]
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
}
