package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A connection that lingers after its snapshot (see lingerFor) holds a
// slot nobody waits for: with every slot held by lingering connections, a
// write and a snapshot get one at once, and one already waiting for a
// slot is woken by the linger that takes the last one; nothing waits for
// the linger to run out (here an hour, against each call's 20 s bound).
func TestALingeringConnectionsSlotIsNeverWaitedFor(t *testing.T) {
	if err := pgtest.Available(); err != nil {
		pgtest.Skip(t, err)
	}
	st, err := Open(context.Background(), pgtest.URL(t), Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.lingering.lingerFor = time.Hour
	slots := cap(st.slots)
	bounded := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	// Every slot held by a snapshot, then by its lingering connection.
	lingerAll := func() {
		t.Helper()
		var snaps []*snapshot
		for range slots {
			snap, _, _, err := st.SnapshotAll(bounded(), [][]byte{[]byte("k")})
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snap.(*snapshot))
		}
		for _, snap := range snaps {
			snap.Close()
		}
		st.lingering.mu.Lock()
		n := len(st.lingering.conns)
		st.lingering.mu.Unlock()
		if n != slots || len(st.slots) != slots {
			t.Fatalf("%d connections linger holding %d slots, want all %d", n, len(st.slots), slots)
		}
	}
	lingerAll()
	b, err := st.NewSharedBatch(bounded())
	if err != nil {
		t.Fatalf("a write with every slot lingering: %v", err)
	}
	if _, err := b.Begin(bounded(), nil, [][]byte{[]byte("k")}, true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	snap, _, _, err := st.SnapshotAll(bounded(), nil)
	if err != nil {
		t.Fatalf("a snapshot with every slot lingering: %v", err)
	}
	snap.Close()

	// Every slot held by an open snapshot; a write waits, and gets the
	// slot of the first one closed, which lingers.
	var open []*snapshot
	for len(open) < slots {
		snap, _, _, err := st.SnapshotAll(bounded(), nil)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, snap.(*snapshot))
	}
	got := make(chan error, 1)
	go func() {
		b, err := st.NewSharedBatch(bounded())
		if err == nil {
			b.Close()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // the write is waiting (or about to)
	open[0].Close()
	if err := <-got; err != nil {
		t.Fatalf("a write waiting for a slot that lingered: %v", err)
	}
	for _, snap := range open[1:] {
		snap.Close()
	}
}
