package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// LeaseTTLMin is the shortest lease of background work: a node that
// stops renewing (it died, froze, or lost the database) hands its work
// over within its lease, and a pass slower than the lease lets another
// node start one (see surgepay.Leaser). A lease is three intervals of its
// work, and at least this.
const LeaseTTLMin = 3 * time.Second

// leaseReleaseTimeout bounds giving a lease up at shutdown.
const leaseReleaseTimeout = time.Second

// newNodeName names an engine among those sharing a store: the holder of
// its leases. Host, process and a random part, so that a restarted
// process (or a second engine in one) is a new holder.
func newNodeName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// NodeName is the engine's name as the holder of leases.
func (e *Engine) NodeName() string { return e.node }

// Lease is one piece of background work run on one node at a time when
// the store is shared (surgepay.Leaser), and always on a store that is
// not. Held is called at each pass. Safe for one goroutine. A nil *Lease
// is always held.
type Lease struct {
	e    *Engine
	l    surgepay.Leaser // nil: the store is this node's alone
	name string
	ttl  time.Duration
	held atomic.Bool
	told bool // a state was logged
}

// NewLease returns the lease name of work run every interval.
func (e *Engine) NewLease(name string, interval time.Duration) *Lease {
	l, _ := e.store.(surgepay.Leaser)
	return &Lease{e: e, l: l, name: name, ttl: max(3*interval, LeaseTTLMin)}
}

// Held takes or renews the lease and reports whether this node has it,
// so that the work's pass runs now. A failing store holds nothing (the
// store logs its state). A change of hands is logged once.
func (l *Lease) Held(ctx context.Context) bool {
	if l == nil || l.l == nil {
		return true
	}
	ok, err := l.l.Lease(ctx, l.name, l.e.node, l.ttl)
	if err != nil {
		ok = false
	}
	if was := l.held.Swap(ok); was != ok || !l.told {
		l.told = true
		switch {
		case ok:
			l.e.log.Info("lease taken: this node runs "+l.name, "lease", l.name, "ttl", l.ttl.String())
		case err == nil:
			l.e.log.Info("lease held by another node: "+l.name+" runs there", "lease", l.name)
		}
	}
	return ok
}

// Release gives the lease up if this node holds it, so that another node
// takes it at its next pass rather than after the lease ends: serve's
// shutdown calls it.
func (l *Lease) Release() {
	if l == nil || l.l == nil || !l.held.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := l.l.ReleaseLease(ctx, l.name, l.e.node); err != nil {
		l.e.log.Warn("release lease", "lease", l.name, "err", err.Error())
	}
}

// RunEvery calls pass every interval until ctx ends, while this node
// holds lease (nil: always), and releases lease when it returns: the loop
// of every piece of leased background work.
func RunEvery(ctx context.Context, interval time.Duration, lease *Lease, pass func(context.Context)) {
	defer lease.Release()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if lease.Held(ctx) {
			pass(ctx)
		}
	}
}
