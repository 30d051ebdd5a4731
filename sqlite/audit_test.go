package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestAuditEventsAppendOnly: the database itself refuses to change or
// delete an audit row, whoever asks (another connection, an operator
// with the sqlite3 shell): the trail cannot be edited quietly.
func TestAuditEventsAppendOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := &surgepay.AuditEvent{ID: surgepay.NewID("aud"), Created: time.Now(), Actor: "cli:a", Action: surgepay.AuditMerchantDisabled,
		MerchantID: "mer_x", ObjectID: "mer_x"}
	if err := db.Apply(t.Context(), &surgepay.Write{Audit: []*surgepay.AuditEvent{e}}); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{"UPDATE audit_events SET actor = 'someone else'", "DELETE FROM audit_events"} {
		if _, err := raw.ExecContext(t.Context(), stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	es, _, err := db.ListAuditEvents(t.Context(), surgepay.AuditFilter{})
	if err != nil || len(es) != 1 || es[0].Actor != "cli:a" {
		t.Errorf("audit rows after the attempts: %v, %v; want the one row unchanged", es, err)
	}
}
