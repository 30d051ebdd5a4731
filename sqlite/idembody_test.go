package sqlite

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestStoredBodyKeepsCallerStacksSmall: storedBody compresses on a
// compressor goroutine, so goroutines that store answers keep small
// stacks. The same goroutines compressing on their own stacks (the
// control, run second because the runtime sizes new stacks by the average
// it has seen) grow each stack past the encoder's 64 KiB table; without
// the control's growth the measure would prove nothing.
func TestStoredBodyKeepsCallerStacksSmall(t *testing.T) {
	body := []byte(strings.Repeat(`{"id":"pay_01m89ygh23phsbtq93t0h6qpbp","object":"payment","status":"succeeded",`+
		`"amount":12403,"currency":"usd","transactions":[],"created":1795630318}`, 4))
	want := compressBody(body)
	if len(want) >= len(body) {
		t.Fatalf("compressBody kept %d of %d bytes: want a compressible body", len(want), len(body))
	}
	if got := storedBody(body); !bytes.Equal(got, want) { // also starts the compressors
		t.Fatalf("storedBody = %x; want compressBody's %x", got, want)
	}
	const goroutines = 200
	stackGrowth := func(compress func([]byte) []byte) uint64 {
		var ready, hold sync.WaitGroup
		release := make(chan struct{})
		ready.Add(goroutines)
		hold.Add(goroutines)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range goroutines {
			go func() {
				defer hold.Done()
				out := compress(body)
				ready.Done()
				<-release // keep the stack alive while it is measured
				if !bytes.Equal(out, want) {
					t.Errorf("compressed to %x; want %x", out, want)
				}
			}()
		}
		ready.Wait()
		runtime.ReadMemStats(&after)
		close(release)
		hold.Wait()
		return after.StackInuse - min(before.StackInuse, after.StackInuse)
	}
	off := stackGrowth(storedBody)
	on := stackGrowth(compressBody)
	t.Logf("stacks of %d goroutines: %d KiB compressing elsewhere, %d KiB compressing on their own", goroutines, off>>10, on>>10)
	if on < goroutines*64<<10 {
		t.Fatalf("control: %d goroutines compressing on their stacks grew them by %d KiB; want ≥ 64 KiB each", goroutines, on>>10)
	}
	if off > on/4 {
		t.Fatalf("storedBody's callers grew their stacks by %d KiB, more than a quarter of the control's %d KiB", off>>10, on>>10)
	}
}

// TestCompressBodyRoundTrip: answers of every size round-trip, those
// longer than the kept scratch buffer too; a compressed answer is stored
// in a slice of its own exact size (not the encoder's bound, and not the
// scratch buffer the next answer overwrites); one that does not compress
// is kept as it is.
func TestCompressBodyRoundTrip(t *testing.T) {
	unit := `{"id":"pay_01m89ygh23phsbtq93t0h6qpbp","object":"payment","status":"succeeded","amount":12403},`
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(i*7919>>3) ^ byte(i*31)
	}
	var prev []byte
	var prevCopy []byte
	for _, body := range [][]byte{
		[]byte(unit[:bodyCompressMin-1]),
		[]byte(strings.Repeat(unit, 2)),
		[]byte(strings.Repeat(unit, 10)),
		[]byte(strings.Repeat(unit, 2*bodyScratchKeepMax/len(unit))),
		noise,
	} {
		stored := compressBody(body)
		got, err := decompressBody(stored)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: round trip err %v, equal %v", len(body), err, bytes.Equal(got, body))
		}
		if len(stored) > 0 && stored[0] == bodyMark && cap(stored) != len(stored) {
			t.Errorf("%d bytes: stored in %d of a slice of %d", len(body), len(stored), cap(stored))
		}
		if prev != nil && !bytes.Equal(prev, prevCopy) {
			t.Fatalf("the previous answer changed under the next one's encoding")
		}
		prev, prevCopy = stored, bytes.Clone(stored)
	}
}
