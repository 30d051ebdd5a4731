package main

import (
	"context"
	"log/slog"
	"testing"
)

// TestReadinessFollowsTheStore: /readyz's store probe is true while the
// store answers and false once it cannot.
func TestReadinessFollowsTheStore(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	a, err := openApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.storeReachable(context.Background()) {
		t.Fatal("store reachable = false on an open store")
	}
	a.store.Close()
	if a.storeReachable(context.Background()) {
		t.Fatal("store reachable = true on a closed store")
	}
}
