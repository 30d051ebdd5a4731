package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
)

// TestAuditEventsAppendOnly: the database itself refuses to change,
// delete or truncate audit rows, whoever asks.
func TestAuditEventsAppendOnly(t *testing.T) {
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
	db := openAt(t, cfg)
	e := &surgepay.AuditEvent{ID: surgepay.NewID("aud"), Created: time.Now(), Actor: "cli:a", Action: surgepay.AuditMerchantDisabled,
		MerchantID: "mer_x", ObjectID: "mer_x"}
	if err := db.Apply(t.Context(), &surgepay.Write{Audit: []*surgepay.AuditEvent{e}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{cfg.Schema, "audit_events"}.Sanitize()
	for _, stmt := range []string{"UPDATE " + table + " SET actor = 'someone else'", "DELETE FROM " + table, "TRUNCATE " + table} {
		if _, err := conn.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	es, _, err := db.ListAuditEvents(t.Context(), surgepay.AuditFilter{})
	if err != nil || len(es) != 1 || es[0].Actor != "cli:a" {
		t.Errorf("audit rows after the attempts: %v, %v; want the one row unchanged", es, err)
	}
}
