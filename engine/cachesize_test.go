package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/vault"
)

// sampleBodyBytes is the length of a sale's stored answer: the payment's
// JSON and a newline, as `surgepay serve` answered a sale of 20.00 USD on
// a saved card (authorization and capture, no metadata).
const sampleBodyBytes = 725

// cacheSamples makes the values surgepay caches, each one freshly
// allocated as a store read or a request makes it, with the lengths real
// ones have: IDs from NewID, a sealed card number from the vault, a
// sale's answer of sampleBodyBytes.
type cacheSamples struct {
	merchantID string
	keys       *vault.Keyring
	body       []byte
}

func newCacheSamples(t testing.TB) *cacheSamples {
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte(`{"id":"pay_0000000000000000000000000","object":"payment"}`), sampleBodyBytes/56+1)[:sampleBodyBytes-1]
	return &cacheSamples{merchantID: surgepay.NewID("mer"), keys: keys, body: body}
}

func (s *cacheSamples) merchant() string { return strings.Clone(s.merchantID) }

func (s *cacheSamples) apiKey(int) (string, *surgepay.APIKey) {
	hash := make([]byte, 32)
	rand.Read(hash)
	return hex.EncodeToString(hash), &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: s.merchant(), Hash: hash,
		Prefix: strings.Clone("sk_live_4eC3"), Created: time.Now()}
}

func (s *cacheSamples) customer(int) (string, *surgepay.Customer) {
	c := &surgepay.Customer{ID: surgepay.NewID("cus"), MerchantID: s.merchant(), Name: strings.Clone("Ada Lovelace"),
		Email: strings.Clone("ada.lovelace@example.com"), Created: time.Now(), Updated: time.Now(), Version: 1}
	return c.MerchantID + "/" + c.ID, c
}

// customerMetadata is a customer with a description and five metadata
// entries, to check mapBytes.
func (s *cacheSamples) customerMetadata(i int) (string, *surgepay.Customer) {
	k, c := s.customer(i)
	c.Description = strings.Clone("a customer with metadata, as some merchants keep")
	c.Metadata = map[string]string{}
	for j := range 5 {
		c.Metadata[fmt.Sprintf("key_%d", j)] = fmt.Sprintf("value of key %d", j)
	}
	return k, c
}

func (s *cacheSamples) paymentMethod(i int) (string, *surgepay.PaymentMethod) {
	pm := &surgepay.PaymentMethod{ID: surgepay.NewID("pm"), MerchantID: s.merchant(), CustomerID: surgepay.NewID("cus"),
		Brand: strings.Clone("visa"), Last4: strings.Clone("4242"), ExpMonth: 12, ExpYear: 2030, Created: time.Now()}
	pan := []byte("4242424242424242")
	pm.Fingerprint = s.keys.Fingerprint(pm.MerchantID, pan)
	sealed, err := s.keys.Encrypt(pan, []byte(methodKey(pm.MerchantID, pm.ID)))
	if err != nil {
		panic(err)
	}
	pm.SealedPAN = sealed
	return methodKey(pm.MerchantID, pm.ID), pm
}

func (s *cacheSamples) idempotency(int) (string, *surgepay.IdempotencyRecord) {
	var k [16]byte
	rand.Read(k[:])
	call := &Call{MerchantID: s.merchant(), IdempotencyKey: hex.EncodeToString(k[:])} // as loadtest's 32 hex digits
	body := append([]byte(nil), s.body...)                                            // as json.Marshal returns it
	body = append(body, '\n')                                                         // as api's render ends it
	return call.idemCacheKey(), &surgepay.IdempotencyRecord{MerchantID: call.MerchantID, Key: call.IdempotencyKey,
		StatusCode: 200, Body: body, Created: time.Now()}
}

// entryCost is what n entries of one entity cost, per entry: the heap
// they took (HeapAlloc after a GC) and what the cache counted against
// the entity's bytes_max.
type entryCost struct {
	entries       int
	heap, counted float64
}

// measureEntries fills entity's table, with its bounds at bytesMax and
// entriesMax, with n values from build, and returns what they cost.
func measureEntries[V any](t testing.TB, entity string, size func(V) int, bytesMax int64, entriesMax, n int,
	build func(i int) (string, V)) entryCost {
	cfg := cache.DefaultConfig()
	e := cfg.Entities[entity]
	e.BytesMax, e.EntriesMax = bytesMax, entriesMax
	cfg.Entities[entity] = e
	c, err := cache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tab := cache.Entity(c, entity, nil, cache.WithSize(size))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		k, v := build(i)
		if err := tab.Set(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	var st cache.Stat
	for _, s := range c.Stats() { // applies the pending evictions
		if s.Entity == entity {
			st = s
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tab)
	if st.Entries == 0 {
		t.Fatalf("%s: no entries kept", entity)
	}
	return entryCost{entries: st.Entries, heap: float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(st.Entries),
		counted: float64(st.Bytes) / float64(st.Entries)}
}

// costs measures each entity with entriesMeasured entries, within its
// bounds: what one entry costs.
const entriesMeasured = 20_000

func measureAll(t testing.TB) map[string]entryCost {
	s := newCacheSamples(t)
	const b, limit, n = 1 << 30, cache.EntriesMaxLimit, entriesMeasured
	return map[string]entryCost{
		"api_keys":           measureEntries(t, cache.APIKeys, apiKeyBytes, b, limit, n, s.apiKey),
		"customers":          measureEntries(t, cache.Customers, customerBytes, b, limit, n, s.customer),
		"customers+metadata": measureEntries(t, cache.Customers, customerBytes, b, limit, n, s.customerMetadata),
		"payment_methods":    measureEntries(t, cache.PaymentMethods, paymentMethodBytes, b, limit, n, s.paymentMethod),
		"idempotency":        measureEntries(t, cache.Idempotency, idempotencyBytes, b, limit, n, s.idempotency),
	}
}

// TestCacheSizeEstimates: what each entity counts against its bytes_max
// per entry is what the entry takes on the heap, within 15 %, so that
// bytes_max bounds memory as its documentation says.
func TestCacheSizeEstimates(t *testing.T) {
	for name, c := range measureAll(t) {
		t.Logf("%s: heap %.0f B/entry, counted %.0f B/entry", name, c.heap, c.counted)
		if c.entries != entriesMeasured {
			t.Errorf("%s: %d entries kept, want all %d (within the bounds)", name, c.entries, entriesMeasured)
		}
		if r := c.counted / c.heap; r < 0.85 || r > 1.15 {
			t.Errorf("%s: counted %.0f B/entry for %.0f B/entry on the heap (ratio %.2f), want within 15 %%", name, c.counted, c.heap, r)
		}
	}
}

// TestIdempotencyCacheBoundedByBytes: sales' answers far beyond the
// idempotency entity's default bytes_max leave it holding about
// bytes_max of heap: no more (within the estimate's 15 %), and not much
// less (the bound, not the entry count, decides).
func TestIdempotencyCacheBoundedByBytes(t *testing.T) {
	d := cache.DefaultConfig().Entities[cache.Idempotency]
	s := newCacheSamples(t)
	n := int(3 * d.BytesMax / (sampleBodyBytes + 400))
	c := measureEntries(t, cache.Idempotency, idempotencyBytes, d.BytesMax, d.EntriesMax, n, s.idempotency)
	heap, counted := c.heap*float64(c.entries), c.counted*float64(c.entries)
	t.Logf("%d of %d answers kept: heap %.1f MiB, counted %.1f MiB, bytes_max %d MiB", c.entries, n, heap/(1<<20), counted/(1<<20), d.BytesMax>>20)
	if counted > float64(d.BytesMax) {
		t.Errorf("counted %.0f bytes, over bytes_max %d", counted, d.BytesMax)
	}
	if heap > 1.15*float64(d.BytesMax) {
		t.Errorf("%d answers take %.1f MiB of heap, want at most bytes_max %d MiB + 15 %%", c.entries, heap/(1<<20), d.BytesMax>>20)
	}
	if counted < 0.9*float64(d.BytesMax) {
		t.Errorf("%d answers counted %.1f MiB, want at least 90 %% of bytes_max %d MiB", c.entries, counted/(1<<20), d.BytesMax>>20)
	}
}

// BenchmarkCacheEntryBytes reports the heap one cached entry of each
// entity takes (docs/cache.md): go test -run '^$' -bench CacheEntryBytes ./engine/
func BenchmarkCacheEntryBytes(b *testing.B) {
	for b.Loop() {
		for name, c := range measureAll(b) {
			b.ReportMetric(c.heap, name+"-B/entry")
		}
	}
}
