package main

import (
	"context"
	"fmt"
	"io"

	"github.com/surgepay/surgepay/sqlite"
)

const backupUsage = `Usage: surgepay backup --out FILE [--config FILE]

Writes a consistent copy of the embedded database (storage = "sqlite") to
FILE while servers keep serving: SQLite's VACUUM INTO in one read
transaction, which blocks no writer. The copy is written 0600 under a
temporary name, checked (quick_check, payments counted) and only then
renamed to FILE; FILE must not exist. While it runs the WAL cannot be
checkpointed past its snapshot and grows; it reads the whole database
once. To restore: stop the servers, put FILE in place of the database
(sqlite.path, default DATA_DIR/surgepay.db) with its -wal and -shm files
removed, and start them. PostgreSQL: use pg_dump or your provider's
backups. Keep the keyring file (DATA_DIR/keyring.json) with the backup,
apart: cards in the copy decrypt only with it. See docs/operations.md.
`

func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("backup", backupUsage)
	out := c.Flags.String("out", "", "the backup `FILE` to write (must not exist)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		return c.Fail(stderr, "--out FILE is required")
	}
	cfg, code := commandConfig(*path, stderr)
	if code >= 0 {
		return code
	}
	if cfg.Storage != "sqlite" {
		fmt.Fprintf(stderr, "surgepay: backup copies the embedded database; storage is %q: use pg_dump or your provider's backups\n", cfg.Storage)
		return 1
	}
	res, err := sqlite.Backup(ctx, cfg.SQLite.Path, *out)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup %s: %d bytes, %d payments, checked, in %s\n", res.Path, res.Bytes, res.Payments, res.Took.Round(1e6))
	return 0
}
