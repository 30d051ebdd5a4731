package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay/postgres"
)

// TestMigrationNewerSchema: during a rolling upgrade the previous release
// runs on the schema the next one migrated (docs/upgrade.md). A schema
// with a migration newer than every embedded one opens, unless one of its
// migrations is a contract that this release is too old for.
func TestMigrationNewerSchema(t *testing.T) {
	latest := postgres.LatestMigration()
	for _, tt := range []struct {
		name           string
		contractBefore int64 // the newer migration's; 0: an expand migration
		wantErr        bool
	}{
		{"OK", 0, false},
		{"ContractMet", latest, false},
		{"ErrContract", latest + 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
			openAt(t, cfg).Close()
			conn, err := pgx.Connect(context.Background(), cfg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			// What the next release's migrate records for its migration.
			newer := latest + 1
			if _, err := conn.Exec(context.Background(), "INSERT INTO "+cfg.Schema+
				".schema_migrations (version, contract_before) VALUES ($1, $2)", newer, tt.contractBefore); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			cfg.Log = slog.New(slog.NewTextHandler(&logged, nil))
			db, err := postgres.Open(context.Background(), cfg)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Open on a schema at migration %d (contract_before %d): %v, want it to open",
						newer, tt.contractBefore, err)
				}
				db.Close()
				if want := "schema_migration=" + strconv.FormatInt(newer, 10); !strings.Contains(logged.String(), want) {
					t.Errorf("log: %q; want a line with %s", logged.String(), want)
				}
				return
			}
			if err == nil {
				db.Close()
				t.Fatalf("Open on a schema whose migration %d contracts binaries before %d: nil error, want a refusal",
					newer, tt.contractBefore)
			}
			for _, want := range []string{strconv.FormatInt(tt.contractBefore, 10), strconv.FormatInt(latest, 10), "upgrade.md"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %v; want it to name %s", err, want)
				}
			}
		})
	}
}

// TestParseContract: the directive a contract migration carries.
func TestParseContract(t *testing.T) {
	for _, tt := range []struct {
		name    string
		version int64
		sql     string
		want    int64
		wantErr bool
	}{
		{"None", 20, "-- 0020_x: a new table\nCREATE TABLE x (id int);", 0, false},
		{"OK", 20, "-- 0020_drop_foo\n-- contract: binaries before 0018 read payments.foo, dropped here\nALTER TABLE payments DROP COLUMN foo;", 18, false},
		{"Itself", 20, "-- contract: binaries before 0020\nDROP TABLE x;", 20, false},
		{"NotAtLineStart", 20, "-- see: -- contract: binaries before 0018\nSELECT 1;", 0, false},
		{"ErrAboveItself", 20, "-- contract: binaries before 0021\nDROP TABLE x;", 0, true},
		{"ErrZero", 20, "-- contract: binaries before 0000\nDROP TABLE x;", 0, true},
		{"ErrBeforeContracts", 11, "-- contract: binaries before 0010\nDROP TABLE x;", 0, true},
		{"ErrTwice", 20, "-- contract: binaries before 0018\n-- contract: binaries before 0019\nDROP TABLE x;", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := postgres.ParseContract(tt.version, tt.sql)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseContract = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
