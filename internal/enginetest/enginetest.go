// Package enginetest builds engines for tests of the packages above the
// engine (api, cmd/surgepay). It is apart from internal/testenv because
// the engine's own tests import testenv, which therefore cannot import
// the engine.
package enginetest

import (
	"testing"

	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// SQLite returns an engine on a fresh SQLite store with the in-process
// simulator and a new card-vault keyring, running settings (nil: the
// defaults).
func SQLite(t testing.TB, settings *engine.Settings) *engine.Engine {
	t.Helper()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: testenv.OpenSQLite(t), Provider: sim.New(sim.DefaultConfig()), Vault: keys})
	if err != nil {
		t.Fatal(err)
	}
	if settings != nil {
		eng.SetSettings(settings)
	}
	return eng
}
