package surgepay

import (
	"context"
	"sync/atomic"
	"time"
)

// Statement kinds counted per request.
const (
	StmtSelect = iota
	StmtInsert
	StmtUpdate
	StmtDelete
	stmtKinds
)

// StatementCounter counts the SQL statements issued on behalf of one request,
// by kind, and the time spent in the store. Stores increment it through
// CountStatement; transaction control (BEGIN, COMMIT, SAVEPOINT) is shared by
// a whole group-commit batch and not counted. Safe for concurrent use.
type StatementCounter struct {
	kinds     [stmtKinds]atomic.Int64
	storeNano atomic.Int64
}

// Total returns the number of statements counted.
func (c *StatementCounter) Total() int64 {
	var n int64
	for i := range c.kinds {
		n += c.kinds[i].Load()
	}
	return n
}

// Kind returns the number of statements of one kind (StmtSelect...).
func (c *StatementCounter) Kind(kind int) int64 { return c.kinds[kind].Load() }

// StoreTime returns the time spent waiting on the store.
func (c *StatementCounter) StoreTime() time.Duration { return time.Duration(c.storeNano.Load()) }

type counterKey struct{}

// WithStatementCounter returns a context that carries c.
func WithStatementCounter(ctx context.Context, c *StatementCounter) context.Context {
	return context.WithValue(ctx, counterKey{}, c)
}

// StatementCounterFrom returns the counter in ctx, or nil.
func StatementCounterFrom(ctx context.Context) *StatementCounter {
	c, _ := ctx.Value(counterKey{}).(*StatementCounter)
	return c
}

// CountStatement adds one statement of kind to the counter in ctx, if any.
func CountStatement(ctx context.Context, kind int) {
	if c := StatementCounterFrom(ctx); c != nil {
		c.kinds[kind].Add(1)
	}
}

// CountStoreTime adds d to the time spent in the store for the request in ctx.
func CountStoreTime(ctx context.Context, d time.Duration) {
	if c := StatementCounterFrom(ctx); c != nil {
		c.storeNano.Add(int64(d))
	}
}
