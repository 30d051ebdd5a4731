package sim_test

import (
	"net/http/httptest"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/providertest"
	"github.com/surgepay/surgepay/provider/sim"
)

func TestConformance(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		providertest.Run(t, func(t *testing.T) surgepay.Provider { return sim.New(sim.DefaultConfig()) })
	})
	t.Run("HTTP", func(t *testing.T) {
		providertest.Run(t, func(t *testing.T) surgepay.Provider {
			_, c := newHTTP(t, sim.DefaultConfig())
			return c
		})
	})
	t.Run("SharedProvider", func(t *testing.T) {
		p := sim.New(sim.DefaultConfig())
		providertest.Run(t, func(t *testing.T) surgepay.Provider { return p })
	})
}

// newServer serves a new simulator on 127.0.0.1 and returns it with its URL.
func newServer(t *testing.T, cfg sim.Config) (*sim.Provider, string) {
	t.Helper()
	p := sim.New(cfg)
	srv := httptest.NewServer(sim.NewHandler(p))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// newHTTP serves a new simulator on 127.0.0.1 and returns it with a client.
func newHTTP(t *testing.T, cfg sim.Config) (*sim.Provider, *sim.Client) {
	t.Helper()
	p, url := newServer(t, cfg)
	return p, newClient(t, url, nil)
}
