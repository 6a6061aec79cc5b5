package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// acquireAsync starts acquire in a goroutine and returns where its slot
// arrives.
func acquireAsync(g *scriptGate, ctx context.Context, key string) <-chan slot {
	ch := make(chan slot, 1)
	go func() {
		s, err := g.acquire(ctx, key)
		if err == nil {
			ch <- s
		}
		close(ch)
	}()
	return ch
}

// waitQueued waits until n requests wait at the gate.
func waitQueued(t *testing.T, g *scriptGate, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, waiting := g.stats(); waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiting", n)
		}
	}
}

func TestScriptGateSharesSlotsBetweenPartitions(t *testing.T) {
	ctx := context.Background()
	g := newScriptGate(1, 1, time.Millisecond, time.Hour)
	var clock atomic.Int64
	g.now = func() time.Time { return time.Unix(clock.Load(), 0) }
	hot, err := g.acquire(ctx, "hot")
	if err != nil || hot.short {
		t.Fatalf("first script: %+v %v, want a full slot", hot, err)
	}
	// The hot partition holds its share: its next script waits, while
	// another partition's gets the short slot at once.
	hot2 := acquireAsync(g, ctx, "hot")
	waitQueued(t, g, 1)
	cold, err := g.acquire(ctx, "cold")
	if err != nil || !cold.short {
		t.Fatalf("other partition: %+v %v, want a short slot at once", cold, err)
	}
	// A short run that overran keeps its partition out of short slots.
	g.release(cold, true)
	coldAgain := acquireAsync(g, ctx, "cold")
	waitQueued(t, g, 2)
	other, err := g.acquire(ctx, "other")
	if err != nil || !other.short {
		t.Fatalf("third partition: %+v %v, want a short slot", other, err)
	}
	g.release(other, false)
	// The full slot goes to the partitions in turn: hot waited first.
	g.release(hot, false)
	s := <-hot2
	if s.key != "hot" || s.short {
		t.Fatalf("after the hot one: %+v, want hot's queued script in the full slot", s)
	}
	hot3 := acquireAsync(g, ctx, "hot")
	waitQueued(t, g, 2)
	g.release(s, false)
	if s := <-coldAgain; s.key != "cold" || s.short {
		t.Fatalf("next turn: %+v, want cold's script in the full slot", s)
	}
	// The short slot is free, and hot holds nothing now; but a short slot
	// was overrun lately, so it goes to arrivals only, not to those waiting.
	x, err := g.acquire(ctx, "x")
	if err != nil || !x.short {
		t.Fatalf("arrival after an overrun: %+v %v, want the short slot", x, err)
	}
	g.release(x, false)
	waitQueued(t, g, 1)
	clock.Add(int64(time.Hour / time.Second / 2))
	y, err := g.acquire(ctx, "y")
	if err != nil || !y.short {
		t.Fatalf("arrival: %+v %v, want the short slot", y, err)
	}
	g.release(y, false)
	if s := <-hot3; s.key != "hot" || !s.short {
		t.Fatalf("hot's next, a while after the overrun: %+v, want the short slot", s)
	}
	// A waiter that gives up leaves the queue.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := acquireAsync(g, cctx, "quitter")
	waitQueued(t, g, 1)
	cancel()
	if _, ok := <-gaveUp; ok {
		t.Fatal("a cancelled wait got a slot")
	}
	waitQueued(t, g, 0)
}
