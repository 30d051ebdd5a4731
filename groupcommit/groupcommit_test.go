package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatchesConcurrentCallers(t *testing.T) {
	var committed atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c := New(Config{BatchSizeMax: 64}, func(items []*Item[int]) error {
		once.Do(func() { close(entered); <-release }) // hold the first commit so the rest queue up
		committed.Add(int64(len(items)))
		return nil
	})
	const n = 100
	var wg sync.WaitGroup
	submit := func() { defer wg.Done(); _ = c.Submit(context.Background(), 1) }
	wg.Add(1)
	go submit()
	<-entered
	for i := 1; i < n; i++ {
		wg.Add(1)
		go submit()
	}
	for c.QueueDepth() < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	c.Close()
	st := c.Stats()
	if committed.Load() != n || st.Items != n {
		t.Fatalf("committed %d items (stats %d), want %d", committed.Load(), st.Items, n)
	}
	// 1 held item, then 99 queued items in batches of at most 64: 3 batches.
	if st.Batches != 3 {
		t.Fatalf("got %d batches, want 3", st.Batches)
	}
}

func TestItemErrorsAreSeparate(t *testing.T) {
	c := New(Config{}, func(items []*Item[int]) error {
		for _, it := range items {
			if it.Value%2 == 1 {
				it.Err = errors.New("odd")
			}
		}
		return nil
	})
	defer c.Close()
	if err := c.Submit(context.Background(), 2); err != nil {
		t.Fatalf("even: got %v, want nil", err)
	}
	if err := c.Submit(context.Background(), 3); err == nil {
		t.Fatal("odd: got nil, want error")
	}
}

func TestBatchErrorReachesEveryItem(t *testing.T) {
	boom := errors.New("disk full")
	c := New(Config{}, func(items []*Item[int]) error { return boom })
	defer c.Close()
	if err := c.Submit(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

func TestQueueFullIsBackpressure(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	c := New(Config{QueueDepthMax: 2, BatchSizeMax: 1}, func(items []*Item[int]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	var wg sync.WaitGroup
	submit := func(v int) { defer wg.Done(); _ = c.Submit(context.Background(), v) }
	wg.Add(1)
	go submit(0)
	<-entered                 // the writer holds item 0 in its commit
	for i := 1; i <= 2; i++ { // two more fill the queue
		wg.Add(1)
		go submit(i)
	}
	for c.QueueDepth() < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Submit(context.Background(), 9); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	// SubmitWait waits for room instead, even with its context cancelled,
	// and is committed once the writer moves on.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	waited := make(chan error, 1)
	go func() { waited <- c.SubmitWait(cancelled, 10) }()
	select {
	case err := <-waited:
		t.Fatalf("SubmitWait on a full queue returned %v before there was room", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("SubmitWait: %v", err)
	}
	wg.Wait()
	c.Close()
	if err := c.Submit(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
}
