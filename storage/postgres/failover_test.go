package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A promotion never hands out a sequence number, nor reads a watermark,
// below one handed out or read before it, even when the primary dies with
// transaction ids the standby never heard of: ids of transactions that
// rolled back (a 412, a 409) are WAL-logged without a flush, and the
// promoted standby gives them out again. The sequence numbers carry the
// server's timeline above the transaction id, so every number of the new
// timeline is above every number of the old one; a change-feed reader's
// continuation (a watermark) and a session token (a watermark) are then
// never passed over by a later write. The store finds the promoted
// standby through the multi-host URL, answering ErrUnavailable until then
// (as it does on a standby reached directly, which takes no writes); a duty
// held on the dead primary is lost and taken again on the new one.
func TestSequenceAndWatermarkStayAboveEverythingBeforeAPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	ha := pgtest.NewHA(t)
	ctx := t.Context()
	// The WAL writer flushes unflushed aborts every wal_writer_delay: at
	// its longest, the rollbacks below reach the standby only in part.
	primary, err := pgx.Connect(ctx, ha.PrimaryURL())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ALTER SYSTEM SET wal_writer_delay = '10s'", "SELECT pg_reload_conf()"} {
		if _, err := primary.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	primary.Close(ctx)

	s, err := postgres.Open(ctx, ha.URL(), postgres.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lost, release, err := s.Lead(ctx, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewSharedBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Begin(ctx, nil, nil, true); err != nil {
		t.Fatal(err)
	}
	b.Set([]byte("acked"), []byte("1"))
	session, err := b.CommitWatermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var highest uint64
	for range 2000 {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Begin(ctx, nil, nil, true); err != nil {
			t.Fatal(err)
		}
		seq, err := b.Sequence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, seq)
		b.Close() // rolled back
	}
	before, err := s.Watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before <= highest || before < session {
		t.Fatalf("watermark %d before the kill, want above %d and at least %d", before, highest, session)
	}

	// A store opened on the standby alone (a gateway started during a
	// failover, or given a URL that reaches only the standby) is told to
	// wait: the server is there but takes no writes yet.
	if _, err := postgres.Open(ctx, ha.StandbyURL(), postgres.Options{}); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("opening a store on the standby: %v, want ErrUnavailable", err)
	}

	if err := ha.KillPrimary(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the duty held on the killed primary was not lost within 30 s")
	}
	release()
	if _, err := s.Watermark(ctx); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("watermark with the primary dead and the standby not promoted: %v, want ErrUnavailable", err)
	}
	if err := ha.Promote(); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		seq, err = s.NextSequence(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("sequence after the promotion: %v", err)
		}
	}
	after, err := s.Watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the kill: highest sequence %d, watermark %d; after the promotion: sequence %d, watermark %d", highest, before, seq, after)
	if seq < before || seq <= highest {
		t.Errorf("the promoted standby handed out sequence %d, below the watermark %d read before the kill (highest handed out %d)", seq, before, highest)
	}
	if after < before {
		t.Errorf("the watermark went back from %d to %d across the promotion", before, after)
	}
	if v, err := s.Get(ctx, []byte("acked")); err != nil || string(v) != "1" {
		t.Errorf("the acknowledged write after the promotion: %q, %v", v, err)
	}
	onPromoted, err := postgres.Open(ctx, ha.StandbyURL(), postgres.Options{})
	if err != nil {
		t.Fatalf("opening a store on the promoted standby: %v", err)
	}
	onPromoted.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, release, err := s.Lead(lctx, "ttl"); err != nil {
		t.Errorf("taking the duty again on the promoted standby: %v", err)
	} else {
		release()
	}
}
