package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// rawStmt is a statement prepared on the writer's connection below
// database/sql, for the one statement every sale runs (writer.insSale).
// database/sql converts every argument into a new []driver.NamedValue on
// each call and takes its statement's locks, on the writer's goroutine,
// which is the store's bottleneck; a sale's arguments are made as driver
// values before its Write is queued (saleArgs, driverArgs). Only the
// writer's goroutine uses it, inside conn.Raw as database/sql requires.
type rawStmt struct {
	conn *sql.Conn
	st   driver.Stmt
	ex   driver.StmtExecContext // st
}

func prepareRaw(ctx context.Context, conn *sql.Conn, query string) (*rawStmt, error) {
	r := &rawStmt{conn: conn}
	err := conn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T does not prepare with a context", dc)
		}
		st, err := p.PrepareContext(ctx, query)
		if err != nil {
			return err
		}
		if r.ex, ok = st.(driver.StmtExecContext); !ok {
			_ = st.Close() // the missing method is the error to report
			return fmt.Errorf("driver statement %T does not execute with a context", st)
		}
		r.st = st
		return nil
	})
	return r, err
}

// exec runs the statement with args, which driverArgs made.
func (r *rawStmt) exec(args []driver.NamedValue) error {
	return r.conn.Raw(func(any) error {
		_, err := r.ex.ExecContext(context.Background(), args)
		return err
	})
}

func (r *rawStmt) Close() error {
	if r == nil || r.st == nil {
		return nil
	}
	return r.conn.Raw(func(any) error { return r.st.Close() })
}

// driverArgs returns vals as the driver's arguments, converted as
// database/sql would (driver.DefaultParameterConverter: an int becomes an
// int64, a named string type a string).
func driverArgs(vals []any) ([]driver.NamedValue, error) {
	return appendDriverArgs(make([]driver.NamedValue, 0, len(vals)), vals...)
}

// appendDriverArgs appends vals to args as driverArgs converts them,
// numbered after args.
func appendDriverArgs(args []driver.NamedValue, vals ...any) ([]driver.NamedValue, error) {
	for _, v := range vals {
		switch v.(type) {
		case nil, int64, float64, bool, []byte, string, time.Time:
		default:
			var err error
			if v, err = driver.DefaultParameterConverter.ConvertValue(v); err != nil {
				return args, fmt.Errorf("argument %d: %w", len(args)+1, err)
			}
		}
		args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: v})
	}
	return args, nil
}
