package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestStagedBacklogCountsInChunks checks that StagedBacklog counts a
// backlog longer than its chunk whole, one statement per chunk (each its
// own short read transaction, with rests between them), including a
// backlog that is an exact multiple of the chunk, and stops when its
// context ends.
func TestStagedBacklogCountsInChunks(t *testing.T) {
	db := open(t, sqlite.Config{})
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now()}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	oldest := time.Now().Add(-time.Hour).Truncate(time.Millisecond).UTC()
	var ids []string
	for i := range 6 {
		rec := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: m.ID, PaymentID: surgepay.NewID("pay"),
			Sealed: []byte{byte(i)}, Created: oldest.Add(time.Duration(i) * time.Second)}
		if err := db.Apply(t.Context(), &surgepay.Write{Staged: rec}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	for _, tc := range []struct {
		chunk, want, statements int
	}{
		{chunk: 1, want: 6, statements: 7}, // six full chunks and an empty one
		{chunk: 2, want: 6, statements: 4},
		{chunk: 4, want: 6, statements: 2},
		{chunk: 6, want: 6, statements: 2},
		{chunk: 1000, want: 6, statements: 1},
	} {
		db.SetStagedCountChunk(tc.chunk)
		c := &surgepay.StatementCounter{}
		n, got, err := db.StagedBacklog(surgepay.WithStatementCounter(t.Context(), c))
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.want || !got.Equal(oldest) {
			t.Errorf("chunk %d: StagedBacklog = %d, %v; want %d, %v", tc.chunk, n, got, tc.want, oldest)
		}
		if c.Total() != int64(tc.statements) {
			t.Errorf("chunk %d: %d statements, want %d", tc.chunk, c.Total(), tc.statements)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, _, err := db.StagedBacklog(ctx); err == nil {
		t.Errorf("cancelled: StagedBacklog = %d, nil; want an error", n)
	}
	if err := db.Apply(t.Context(), &surgepay.Write{StagedAck: ids[:5]}); err != nil {
		t.Fatal(err)
	}
	db.SetStagedCountChunk(1)
	n, got, err := db.StagedBacklog(t.Context())
	if want := oldest.Add(5 * time.Second); err != nil || n != 1 || !got.Equal(want) {
		t.Errorf("after acknowledging 5: StagedBacklog = %d, %v, %v; want 1, %v", n, got, err, want)
	}
	if err := db.Apply(t.Context(), &surgepay.Write{StagedAck: ids[5:]}); err != nil {
		t.Fatal(err)
	}
	if n, got, err := db.StagedBacklog(t.Context()); err != nil || n != 0 || !got.IsZero() {
		t.Errorf("empty: StagedBacklog = %d, %v, %v; want 0, zero time", n, got, err)
	}
}
