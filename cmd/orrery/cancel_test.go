package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A client that gives up stops the PostgreSQL work its request started on
// a real gateway: a read and an upsert stuck in PostgreSQL (behind a table
// lock another session holds) stop waiting there promptly after the client
// cancels, not after --postgres-timeout, as pg_stat_activity shows; the
// gateway then serves as before.
func TestClientCancelStopsPostgresWorkOnAGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway as a child process")
	}
	url := pgtest.URL(t)
	const timeout = time.Minute
	f := startGateways(t, 1, "--postgres", url, "--postgres-pool", "8", "--postgres-timeout", timeout.String())
	ctx := t.Context()
	pk := azcosmos.NewPartitionKeyString("p")
	cont := f.conts[0]
	if _, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"acked","pk":"p","v":1}`), nil); err != nil {
		t.Fatal(err)
	}

	lock := pgtest.LockTable(t, url)

	bound := 10 * time.Second // far inside the timeout, on a loaded machine
	ops := map[string]func(ctx context.Context) error{
		"read": func(ctx context.Context) error { _, err := cont.ReadItem(ctx, pk, "acked", nil); return err },
		"upsert": func(ctx context.Context) error {
			_, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"maybe","pk":"p"}`), nil)
			return err
		},
	}
	for name, op := range ops {
		rctx, cancel := context.WithCancel(ctx)
		answered := make(chan error, 1)
		go func() { answered <- op(rctx) }()
		deadline := time.Now().Add(bound)
		for lock.Waiters() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no statement of the gateway waits on the lock after %v", name, bound)
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		cancel()
		if err := <-answered; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: the client got %v, want its cancel", name, err)
		}
		for lock.Waiters() > 0 {
			if time.Since(start) > bound {
				t.Fatalf("%s: %v after its client cancelled, the gateway's statement still waits in PostgreSQL (timeout %v)", name, bound, timeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: PostgreSQL stopped waiting %v after the client cancelled", name, time.Since(start).Round(time.Millisecond))
	}
	lock.Release()
	if _, err := cont.ReadItem(ctx, pk, "acked", nil); err != nil {
		t.Fatalf("read after the cancelled requests: %v", err)
	}
	if !f.alive(0) {
		t.Fatal("the gateway died")
	}
}
