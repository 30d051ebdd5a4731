package engine

import (
	"unsafe"

	"github.com/surgepay/surgepay"
)

// The heap bytes of the cached values, for the entities' byte bounds
// (cache.WithSize, cache.EntityConfig.BytesMax): each value's struct and
// what it points to, by length (capacity for byte slices). Go rounds each
// allocation up to a size class, which these estimates leave out;
// TestCacheSizeEstimates checks them against the heap each entity
// really takes per entry.

func apiKeyBytes(k *surgepay.APIKey) int {
	n := int(unsafe.Sizeof(*k)) + len(k.ID) + len(k.MerchantID) + cap(k.Hash) + len(k.Prefix)
	for _, s := range k.Scopes {
		n += int(unsafe.Sizeof(s)) + len(s)
	}
	return n
}

func customerBytes(c *surgepay.Customer) int {
	return int(unsafe.Sizeof(*c)) + len(c.ID) + len(c.MerchantID) + len(c.Name) + len(c.Email) +
		len(c.Description) + mapBytes(c.Metadata)
}

// Go's maps keep their entries in groups of mapGroupSlots slots, each
// slot a key and a value (two string headers here) plus a control byte;
// a map of at most one group is a header and that group.
const (
	mapGroupSlots  = 8
	mapHeaderBytes = 48
	mapSlotBytes   = 2*int(unsafe.Sizeof("")) + 1
)

func mapBytes(m map[string]string) int {
	if m == nil {
		return 0
	}
	n := mapHeaderBytes + max(len(m), mapGroupSlots)*mapSlotBytes
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

func paymentMethodBytes(pm *surgepay.PaymentMethod) int {
	return int(unsafe.Sizeof(*pm)) + len(pm.ID) + len(pm.MerchantID) + len(pm.CustomerID) + len(pm.Brand) +
		len(pm.Last4) + len(pm.Fingerprint) + len(pm.HolderName) + cap(pm.SealedPAN) + len(pm.Processor) +
		len(pm.ProcessorToken)
}

func idempotencyBytes(r *surgepay.IdempotencyRecord) int {
	return int(unsafe.Sizeof(*r)) + len(r.MerchantID) + len(r.Key) + cap(r.Body)
}
