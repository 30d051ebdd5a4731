package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/config"
)

// `surgepay backup` copies the database of a running server: the copy
// opens as the data folder of a new server that serves what was stored.
func TestBackupCommand(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = \"off\"\nlog_level = \"warn\"\n", dir, freeAddr(t))
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	key := readDevKey(t, dir)
	c := newClient(s.url, key)
	var cus object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, http.StatusOK, &cus)

	out := filepath.Join(t.TempDir(), "backup.db")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--out", out, "--config", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "checked") {
		t.Errorf("backup output %q does not say it checked the copy", stdout.String())
	}
	if code := run(context.Background(), []string{"backup", "--out", out, "--config", file}, &stdout, &stderr); code != 1 {
		t.Errorf("backup onto an existing file: exit %d, want 1", code)
	}

	// Restore: a new data folder with the copy and the keyring.
	dir2 := t.TempDir()
	for src, dst := range map[string]string{out: "surgepay.db", filepath.Join(dir, "keyring.json"): "keyring.json"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir2, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg2 := cfg
	cfg2.DataDir, cfg2.Listen = dir2, freeAddr(t)
	cfg2.SQLite.Path, cfg2.KeyringFile = filepath.Join(dir2, "surgepay.db"), filepath.Join(dir2, "keyring.json")
	s2 := startServe(t, cfg2)
	var got object
	newClient(s2.url, key).must(t, "GET", "/v1/customers/"+cus.ID, "", nil, http.StatusOK, &got)
	if got.ID != cus.ID {
		t.Errorf("restored customer %q, want %q", got.ID, cus.ID)
	}
}
