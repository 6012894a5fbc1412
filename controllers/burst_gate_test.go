package controllers

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBurstGate checks that while pods change at most the gate's slots are taken at once, that
// the callers waiting go on when pods stop changing, and that a quiet gate lets every caller in.
func TestBurstGate(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	g := newBurstGate(2, busy.Load, time.Millisecond)
	var inside, most atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := g.enter(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer leave()
			n := inside.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			inside.Add(-1)
		}()
	}
	waitFor(t, func() bool { return inside.Load() == 2 })
	time.Sleep(20 * time.Millisecond) // time for a third caller to get in, were the gate wrong
	if got := most.Load(); got != 2 {
		t.Fatalf("%d callers in at once while pods change, want 2", got)
	}
	// Pods stop changing: the four waiting go on without a slot.
	busy.Store(false)
	waitFor(t, func() bool { return inside.Load() == 6 })
	close(release)
	wg.Wait()

	// Quiet: no wait, nothing taken.
	leave, err := g.enter(context.Background())
	if err != nil || len(g.slots) != 0 {
		t.Fatalf("enter on a quiet gate: err %v, %d slots taken", err, len(g.slots))
	}
	leave()

	// A caller waiting for a slot gives up with its context.
	busy.Store(true)
	g.slots <- struct{}{}
	g.slots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx); err == nil {
		t.Fatalf("enter with every slot taken and its context done returned no error")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPodIndexChanging checks what the gate asks: whether an event touched a set lately.
func TestPodIndexChanging(t *testing.T) {
	var x PodIndex
	if x.Changing(time.Hour) {
		t.Fatalf("Changing before any event")
	}
	x.tell(nil) // an event that touched no set
	if x.Changing(time.Hour) {
		t.Fatalf("Changing after an event that touched no set")
	}
	x.tell([]string{"log-agent"})
	if !x.Changing(time.Hour) {
		t.Fatalf("not Changing right after an event that touched a set")
	}
	time.Sleep(5 * time.Millisecond)
	if x.Changing(time.Millisecond) {
		t.Fatalf("still Changing 5ms after the event, within 1ms")
	}
}
