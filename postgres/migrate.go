package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/surgepay/surgepay/internal/contract"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded file, NNNN_name.sql, applied once.
type migration struct {
	version int64
	name    string
	sql     string
	// contractBefore is its "-- contract: binaries before NNNN" (0: an
	// expand migration): once it is applied, a surgepay whose newest
	// migration is below NNNN refuses the schema.
	contractBefore int64
}

// contractsVersion is the migration that added schema_migrations'
// contract_before column: a contract migration is numbered above it.
const contractsVersion = 12

// parseContract returns the version a migration's contract directive
// names, or 0 when it has none (contract.Parse).
func parseContract(version int64, sql string) (int64, error) {
	return contract.Parse(version, contractsVersion, sql)
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, path := range names {
		name := strings.TrimPrefix(path, "migrations/")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration %s: name must be NNNN_name.sql", name)
		}
		b, err := migrationFS.ReadFile(path)
		if err != nil {
			return nil, err
		}
		contractBefore, err := parseContract(v, string(b))
		if err != nil {
			return nil, fmt.Errorf("postgres: migration %s: %w", name, err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b), contractBefore: contractBefore})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("postgres: migrations %s and %s share a version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// migrate applies pending migrations in one transaction under a
// transaction-scoped advisory lock keyed by the schema, so nodes starting at
// once apply each migration exactly once and tests in separate schemas do
// not wait for each other.
//
// A schema with migrations newer than every embedded one (the next
// release's, in a rolling upgrade) is used as it is, logged to log if set,
// unless one of them is a contract naming a migration above this
// release's newest: then migrate refuses it (docs/upgrade.md).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, log *slog.Logger) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey(schema)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version bigint PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied, latest := map[int64]bool{}, int64(0)
		for _, v := range versions {
			applied[v], latest = true, max(latest, v)
		}
		for _, m := range ms {
			if applied[m.version] {
				continue
			}
			if m.version < latest {
				// Applying it now would run it after migrations written for
				// a schema that did not have it; skipping it would lose it.
				return fmt.Errorf("%s is not applied but %d, a later one, is: a migration must be numbered above every applied one",
					m.name, latest)
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if err := record(ctx, tx, m); err != nil {
				return fmt.Errorf("record %s: %w", m.name, err)
			}
		}
		if newest := ms[len(ms)-1].version; latest > newest {
			return checkContracts(ctx, tx, latest, newest, log)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// record notes m as applied, with its contract if it has one: a migration
// without one is recorded as migrations were before contractsVersion.
func record(ctx context.Context, tx pgx.Tx, m migration) error {
	if m.contractBefore == 0 {
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version)
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, contract_before) VALUES ($1, $2)",
		m.version, m.contractBefore)
	return err
}

// checkContracts refuses a schema at migration latest, above this
// release's newest, if a contract among its migrations needs a later
// release. Every embedded migration is applied by then, contractsVersion's
// among them, so contract_before exists.
func checkContracts(ctx context.Context, tx pgx.Tx, latest, newest int64, log *slog.Logger) error {
	var before int64
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(contract_before), 0) FROM schema_migrations").Scan(&before); err != nil {
		return fmt.Errorf("read contracts: %w", err)
	}
	if before > newest {
		return fmt.Errorf("the schema is at migration %04d, and a contract among its migrations removed what "+
			"surgepay before migration %04d uses; this surgepay's newest is %04d: run a release with migration %04d "+
			"or later (docs/upgrade.md)", latest, before, newest, before)
	}
	if log != nil {
		log.Info("postgres: the schema is newer than this surgepay: migrations after this one's newest are "+
			"expand-only, so it runs on them (docs/upgrade.md)", "schema_migration", latest, "newest_known", newest)
	}
	return nil
}

// migrationLockKey derives the advisory lock key from the schema.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("surgepay.migrate/" + schema))
	return int64(h.Sum64()) //nolint:gosec // G115: the hash's 64 bits are the key; a wrap to negative is as good a key
}
