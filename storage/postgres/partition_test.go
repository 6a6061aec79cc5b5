package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// timeBound is how long an operation may take to fail on a silent server:
// its timeout plus generous slack for a loaded machine.
func timeBound(timeout time.Duration) time.Duration { return 3*timeout + 2*time.Second }

// A server that goes silent (a partition that drops packets, closing no
// connection) makes every operation answer storage.ErrUnavailable within
// the store's timeout, not when TCP gives up; a value acknowledged before
// is still there once the partition heals, and the store serves again
// without being reopened.
func TestSilentServerAnswersUnavailableWithinTheTimeout(t *testing.T) {
	ctx := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	const timeout = time.Second
	s, err := postgres.Open(context.Background(), proxy.URL(t, raw), postgres.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("acked"), []byte("v1"))
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A snapshot opened before the partition, to read through it after.
	snap, err := s.NewSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if _, err := snap.Get(ctx, []byte("acked")); err != nil {
		t.Fatal(err)
	}

	proxy.SetBlocked(true)
	ops := []struct {
		name string
		run  func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, []byte("acked")); return err }},
		{"Commit", func() error {
			b := s.NewBatch()
			defer b.Close()
			b.Set([]byte("ambiguous"), []byte("v"))
			return b.Commit(ctx)
		}},
		{"NewIterator", func() error {
			it, err := s.NewIterator(ctx, nil, nil, false)
			if err != nil {
				return err
			}
			defer it.Close()
			for it.Next() {
			}
			return it.Err()
		}},
		{"Snapshot.Get", func() error { _, err := snap.Get(ctx, []byte("acked")); return err }},
		{"SharedBatch.Lock", func() error {
			sb, err := s.NewSharedBatch(context.Background())
			if err != nil {
				return err
			}
			defer sb.Close()
			return sb.Lock(context.Background(), []byte("k"), true)
		}},
		{"NextSequence", func() error { _, err := s.NextSequence(context.Background()); return err }},
		{"GetAll", func() error { _, _, err := s.GetAll(context.Background(), [][]byte{[]byte("acked")}); return err }},
		{"SharedBatch.CommitWatermark", func() error {
			sb, err := s.NewSharedBatch(context.Background())
			if err != nil {
				return err
			}
			defer sb.Close()
			sb.Set([]byte("ambiguous"), []byte("v"))
			_, err = sb.CommitWatermark(context.Background())
			return err
		}},
	}
	for _, op := range ops {
		start := time.Now()
		err := op.run()
		took := time.Since(start)
		t.Logf("%s on a silent server: %v", op.name, took.Round(time.Millisecond))
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s on a silent server: %v, want storage.ErrUnavailable", op.name, err)
		}
		if took > timeBound(timeout) {
			t.Errorf("%s on a silent server took %v, more than %v", op.name, took, timeBound(timeout))
		}
	}

	proxy.SetBlocked(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := s.Get(ctx, []byte("acked"))
		if err == nil {
			if string(v) != "v1" {
				t.Fatalf("after the partition the acknowledged value is %q, want v1", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store does not serve again after the partition healed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b = s.NewBatch()
	b.Set([]byte("after"), []byte("v2"))
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("commit after the partition healed: %v", err)
	}
}

// A caller that gives up ends the round trip it is waiting for: on a
// silent server, each operation returns an error wrapping context.Canceled
// promptly after its context is cancelled, far inside the store's timeout.
// (The driver closes the abandoned connection; on a silent server its
// cleanup, a cancel request that cannot be delivered, takes up to 15 s of
// its own before the pool's slot is free again: TestClientCancelStopsPostgresWork
// in server shows the slot back at once on a server that answers.)
func TestCancelledCallReturnsPromptlyNotAtTheTimeout(t *testing.T) {
	live := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	const timeout = time.Minute
	s, err := postgres.Open(live, proxy.URL(t, raw), postgres.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("acked"), []byte("v1"))
	if err := b.Commit(live); err != nil {
		t.Fatal(err)
	}
	snap, err := s.NewSnapshot(live)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()

	proxy.SetBlocked(true)
	defer proxy.SetBlocked(false)
	ops := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, []byte("acked")); return err }},
		{"Commit", func(ctx context.Context) error {
			b := s.NewBatch()
			defer b.Close()
			b.Set([]byte("ambiguous"), []byte("v"))
			return b.Commit(ctx)
		}},
		{"NewIterator", func(ctx context.Context) error {
			it, err := s.NewIterator(ctx, nil, nil, false)
			if err == nil {
				it.Close()
			}
			return err
		}},
		{"NewSnapshot", func(ctx context.Context) error {
			snap, err := s.NewSnapshot(ctx)
			if err == nil {
				snap.Close()
			}
			return err
		}},
		{"Snapshot.Get", func(ctx context.Context) error { _, err := snap.Get(ctx, []byte("acked")); return err }},
		{"SharedBatch.Lock", func(ctx context.Context) error {
			sb, err := s.NewSharedBatch(ctx)
			if err != nil {
				return err
			}
			defer sb.Close()
			return sb.Lock(ctx, []byte("k"), true)
		}},
		{"Watermark", func(ctx context.Context) error { _, err := s.Watermark(ctx); return err }},
		{"GetAll", func(ctx context.Context) error { _, _, err := s.GetAll(ctx, [][]byte{[]byte("acked")}); return err }},
		{"SharedBatch.CommitWatermark", func(ctx context.Context) error {
			sb, err := s.NewSharedBatch(ctx)
			if err != nil {
				return err
			}
			defer sb.Close()
			sb.Set([]byte("ambiguous"), []byte("v"))
			_, err = sb.CommitWatermark(ctx)
			return err
		}},
	}
	const wait = 200 * time.Millisecond // the call is blocked on the server by then
	bound := 10 * time.Second           // far inside the timeout, on a loaded machine
	for _, op := range ops {
		ctx, cancel := context.WithCancel(live)
		time.AfterFunc(wait, cancel)
		start := time.Now()
		err := op.run(ctx)
		took := time.Since(start)
		t.Logf("%s cancelled on a silent server: returned after %v", op.name, took.Round(time.Millisecond))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s cancelled on a silent server: %v, want an error wrapping context.Canceled", op.name, err)
		}
		if errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s cancelled on a silent server: %v, a cancel is not storage.ErrUnavailable", op.name, err)
		}
		if took > bound {
			t.Errorf("%s cancelled on a silent server returned after %v, more than %v", op.name, took, bound)
		}
	}
}

// Close ends the round trips in flight: on a silent server, calls waiting
// for an answer return storage.ErrClosed promptly after Close, far inside
// the store's timeout.
func TestCloseEndsTheRoundTripsInFlight(t *testing.T) {
	live := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	s, err := postgres.Open(live, proxy.URL(t, raw), postgres.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set([]byte("acked"), []byte("v1"))
	if err := b.Commit(live); err != nil {
		t.Fatal(err)
	}
	proxy.SetBlocked(true)
	defer proxy.SetBlocked(false)
	ops := map[string]func() error{
		"Get": func() error { _, err := s.Get(live, []byte("acked")); return err },
		"Commit": func() error {
			b := s.NewBatch()
			defer b.Close()
			b.Set([]byte("ambiguous"), []byte("v"))
			return b.Commit(live)
		},
		"SharedBatch.Begin": func() error {
			sb, err := s.NewSharedBatch(live)
			if err != nil {
				return err
			}
			defer sb.Close()
			_, err = sb.Begin(live, []storage.LockRequest{{Key: []byte("k"), Exclusive: true}}, [][]byte{[]byte("acked")}, true)
			return err
		},
		"GetAll": func() error { _, _, err := s.GetAll(live, [][]byte{[]byte("acked")}); return err },
	}
	errs := make(chan error, len(ops))
	for name, op := range ops {
		go func() {
			if err := op(); !errors.Is(err, storage.ErrClosed) {
				errs <- fmt.Errorf("%s on a silent server, then Close: %v, want storage.ErrClosed", name, err)
				return
			}
			errs <- nil
		}()
	}
	time.Sleep(200 * time.Millisecond) // the calls are blocked on the server by then
	bound := 10 * time.Second          // far inside the timeout, on a loaded machine
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for range ops {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-timer.C:
			t.Fatalf("calls in flight had not returned %v after Close", bound)
		}
	}
	// Close itself waits for the driver's cleanup of the connections,
	// which on a silent server gives up on its own clock.
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}
