package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// blockingKeys is a store whose API-key reads wait for release.
type blockingKeys struct {
	surgepay.Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockingKeys) FindAPIKeyByHash(ctx context.Context, h []byte) (*surgepay.APIKey, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.FindAPIKeyByHash(ctx, h)
}

// Made-up API keys all miss the cache; their store reads are bounded:
// beyond KeyLookupsInflightMax at once a lookup is 503 overloaded at once,
// not one more read queued on the store.
func TestKeyLookupsBounded(t *testing.T) {
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	st := &blockingKeys{Store: testenv.OpenSQLite(t), entered: make(chan struct{}, engine.KeyLookupsInflightMax),
		release: make(chan struct{})}
	eng, err := engine.New(engine.Config{Store: st, Provider: sim.New(sim.DefaultConfig()), Vault: keys})
	if err != nil {
		t.Fatal(err)
	}
	random := func() string {
		b := make([]byte, 16)
		rand.Read(b)
		return "sk_" + hex.EncodeToString(b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, engine.KeyLookupsInflightMax)
	for range engine.KeyLookupsInflightMax {
		wg.Go(func() {
			_, err := eng.Authenticate(context.Background(), random())
			errs <- err
		})
	}
	for range engine.KeyLookupsInflightMax {
		<-st.entered // every bounded slot is now held by a waiting read
	}
	_, err = eng.Authenticate(context.Background(), random())
	if e, ok := err.(*surgepay.Error); !ok || e.Code != surgepay.EUNAVAILABLE || e.Reason != "overloaded" || e.RetryAfter == 0 {
		t.Errorf("a lookup beyond the bound: %v, want EUNAVAILABLE overloaded with RetryAfter", err)
	}
	close(st.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if surgepay.ErrorCode(err) != surgepay.EUNAUTH {
			t.Errorf("a bounded lookup of a made-up key: %v, want EUNAUTH", err)
		}
	}
}
