package postgres

import (
	"context"
	"errors"
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

// watchCountingContext is a context that counts the watches registered
// on it (context.AfterFunc registers through a context's AfterFunc
// method) and those not stopped.
type watchCountingContext struct {
	done            chan struct{}
	mu              sync.Mutex
	err             error
	watches, active int
	funcs           map[int]func()
}

func newWatchCountingContext() *watchCountingContext {
	return &watchCountingContext{done: make(chan struct{}), funcs: map[int]func(){}}
}

func (c *watchCountingContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *watchCountingContext) Done() <-chan struct{}       { return c.done }
func (c *watchCountingContext) Value(any) any               { return nil }

func (c *watchCountingContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// cancel runs the watches before it returns, as a cancel of the
// standard library's contexts does.
func (c *watchCountingContext) cancel() {
	c.mu.Lock()
	c.err = context.Canceled
	close(c.done)
	var fs []func()
	for id, f := range c.funcs {
		delete(c.funcs, id)
		c.active--
		fs = append(fs, f)
	}
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (c *watchCountingContext) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.watches
	c.watches++
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.active++
	c.funcs[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.funcs[id]; !ok {
			return false
		}
		delete(c.funcs, id)
		c.active--
		return true
	}
}

func (c *watchCountingContext) count() (watches, active int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches, c.active
}

// A write's two round trips watch their caller's context with one
// registration, ended when the write gives its connection back; a caller
// that goes away between them still ends the write (its commit does not
// run), while a context that ends after its own call ends no later call
// of the batch, and the pool's connections serve writes after either.
func TestAWriteWatchesItsCallersContextOnce(t *testing.T) {
	s, err := Open(t.Context(), pgtest.URL(t), Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	begin := func(ctx context.Context, i int) storage.SharedBatch {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Begin(ctx, []storage.LockRequest{{Key: []byte("partition"), Exclusive: true}}, [][]byte{[]byte("item")}, true); err != nil {
			t.Fatal(err)
		}
		b.Set([]byte("item"), []byte{byte(i)})
		return b
	}
	for i := range 3 {
		ctx := newWatchCountingContext()
		b := begin(ctx, i)
		if _, err := b.CommitWatermark(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if watches, active := ctx.count(); i > 0 && watches != 1 || active != 0 {
			t.Errorf("write %d registered %d watches of its context, %d left, want 1 and none left", i, watches, active)
		}
	}
	ctx := newWatchCountingContext()
	b := begin(ctx, 9)
	c := b.(*sharedBatch).conn.Conn()
	ctx.cancel()
	if _, err := b.CommitWatermark(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a commit after its caller went away returned %v, want context.Canceled", err)
	}
	b.Close()
	if _, active := ctx.count(); active != 0 {
		t.Errorf("%d watches of a gone caller's context left", active)
	}
	if !c.PgConn().IsClosed() && c.PgConn().TxStatus() != 'I' {
		t.Error("the connection of a write whose caller went away went back to the pool in its transaction")
	}
	if v, err := s.Get(t.Context(), []byte("item")); err != nil || len(v) != 1 || v[0] != 2 {
		t.Fatalf("item = %v, %v, want [2]: the write whose caller went away must not commit", v, err)
	}
	// A call's context governs that call only: one that ends after its
	// call returned ends none of the batch's later calls.
	first := newWatchCountingContext()
	b = begin(first, 3)
	first.cancel()
	if _, err := b.CommitWatermark(t.Context()); err != nil {
		t.Fatalf("a commit after the context of the batch's earlier call ended: %v", err)
	}
	b.Close()
	if v, err := s.Get(t.Context(), []byte("item")); err != nil || len(v) != 1 || v[0] != 3 {
		t.Fatalf("item = %v, %v, want [3]", v, err)
	}
	// Every connection of the pool serves a write after it.
	for i := range 8 {
		ctx := t.Context()
		b := begin(ctx, 10+i)
		if _, err := b.CommitWatermark(ctx); err != nil {
			t.Fatalf("write %d after a caller went away: %v", i, err)
		}
		b.Close()
	}
}
