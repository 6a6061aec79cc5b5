package postgres

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// deadlineConn counts the deadline changes on a connection and keeps the
// last deadline set.
type deadlineConn struct {
	net.Conn
	mu      sync.Mutex
	changes int
	last    time.Time
}

func (c *deadlineConn) set(t time.Time) {
	c.mu.Lock()
	c.changes++
	c.last = t
	c.mu.Unlock()
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.set(t)
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.set(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.set(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) count() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes, c.last
}

// A write's two round trips (locks, id and key read; writes, commit and
// watermark) keep one deadline on their connection, set by the first and
// cleared when the connection goes back to the pool: each change is a
// timer's in the runtime, and the pool's own statements on the connection
// (a ping, a ROLLBACK) must find none left. A batch closed without a
// commit leaves none either.
func TestAWriteSetsItsConnectionsDeadlineOnceAndLeavesNone(t *testing.T) {
	var mu sync.Mutex
	var conns []*deadlineConn
	wrapConn = func(c net.Conn) net.Conn {
		dc := &deadlineConn{Conn: c}
		mu.Lock()
		conns = append(conns, dc)
		mu.Unlock()
		return dc
	}
	t.Cleanup(func() { wrapConn = nil })
	ctx := t.Context()
	s, err := Open(ctx, pgtest.URL(t), Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	total := func() (n int, lasts []time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			k, last := c.count()
			n += k
			lasts = append(lasts, last)
		}
		return n, lasts
	}
	write := func(i int, commit bool) {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Begin(ctx, []storage.LockRequest{{Key: []byte("catalog")}, {Key: []byte("partition"), Exclusive: true}},
			[][]byte{[]byte("meta"), []byte("item")}, true); err != nil {
			t.Fatal(err)
		}
		b.Set([]byte("item"), []byte{byte(i)})
		b.Set([]byte("index"), []byte{byte(i)})
		if !commit {
			return
		}
		if _, err := b.CommitWatermark(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(0, true) // the connection's statements are prepared
	for i := 1; i <= 5; i++ {
		before, _ := total()
		write(i, true)
		after, lasts := total()
		if n := after - before; n > 2 {
			t.Errorf("write %d changed its connection's deadline %d times, want at most 2 (set once, cleared once)", i, n)
		}
		for _, last := range lasts {
			if !last.IsZero() {
				t.Fatalf("after write %d a connection in the pool keeps the deadline %v", i, last)
			}
		}
	}
	write(6, false)
	_, lasts := total()
	for _, last := range lasts {
		if !last.IsZero() {
			t.Fatalf("after a write closed without its commit a connection in the pool keeps the deadline %v", last)
		}
	}
	// The pool's own statement on a connection a write gave back.
	if err := s.pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, []byte("item")); err != nil || len(v) != 1 || v[0] != 5 {
		t.Fatalf("item = %v, %v, want [5]", v, err)
	}
}
