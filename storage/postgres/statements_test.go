package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A write's first round trip (the catalog's shared lock, the partition's
// exclusive one, the item's keys and the transaction id) is two
// statements, the locks with the id and one read of every key, in an
// implicit transaction (no BEGIN): each statement costs the gateway's CPU
// its encoding and result and PostgreSQL's a bind and an execute. The
// answers are those of one statement each: the keys' values as of after
// the locks, an id above every earlier transaction's.
func TestWriteBeginIsTwoStatementsInOneRoundTrip(t *testing.T) {
	ctx := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	s, err := postgres.Open(context.Background(), proxy.URL(t, raw), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	locks := []storage.LockRequest{{Key: []byte("catalog"), Exclusive: false}, {Key: []byte("partition"), Exclusive: true}}
	var last uint64
	fewest := 1 << 30
	var fewestLog []string
	for i := range 6 {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() }) // a batch left open would hold the store's Close
		proxy.StartLog()
		values, err := b.Begin(ctx, locks, [][]byte{[]byte("item"), []byte("absent")}, true)
		log := proxy.Log()
		if err != nil {
			t.Fatal(err)
		}
		// The first use of a statement on a connection prepares it (a
		// round trip more); the fewest is what a write costs.
		if len(log) == 1 && len(log[0].Statements) < fewest {
			fewest, fewestLog = len(log[0].Statements), log[0].Statements
		}
		want := ""
		if i > 0 {
			want = fmt.Sprint(i - 1)
		}
		if i > 0 && string(values[0]) != want || i == 0 && values[0] != nil {
			t.Fatalf("write %d read item %q, want %q", i, values[0], want)
		}
		if values[1] != nil {
			t.Fatalf("write %d read an absent key as %q", i, values[1])
		}
		seq, err := b.Sequence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq <= last {
			t.Fatalf("write %d has id %d, not above the previous one's %d", i, seq, last)
		}
		last = seq
		if err := b.Set([]byte("item"), fmt.Append(nil, i)); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fewest == 1<<30 {
		t.Fatal("no Begin took one round trip")
	}
	if fewest > 2 {
		t.Errorf("a write's Begin sends %d statements, want at most 2:\n\t%s", fewest, strings.Join(fewestLog, "\n\t"))
	}
}

// A write's commit (its sets and deletes, the commit and the watermark) is
// one round trip ended by one Sync, so that PostgreSQL answers it in one
// piece: a Sync makes the server flush its answer, and a second piece
// costs the gateway a read that finds nothing, a park and a wake-up
// before it comes, more than a statement does. The sets and deletes are
// one statement, the round trip at most four (BEGIN, which turns the
// implicit transaction explicit, the writes, COMMIT, the watermark).
// Every set key then holds its value and every deleted key is gone,
// whichever the batch wrote last.
func TestWriteCommitIsOneRoundTripAnsweredInOnePiece(t *testing.T) {
	ctx := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	s, err := postgres.Open(context.Background(), proxy.URL(t, raw), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	seed := s.NewBatch()
	for _, k := range []string{"gone", "gone-then-set", "kept"} {
		seed.Set([]byte(k), []byte("old"))
	}
	if err := seed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fewest := 1 << 30
	var fewestLog []string
	oneTrip := 0
	for i := range 4 {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if _, err := b.Begin(ctx, []storage.LockRequest{{Key: []byte("partition"), Exclusive: true}}, [][]byte{[]byte("kept")}, true); err != nil {
			t.Fatal(err)
		}
		b.Set([]byte("gone"), []byte("x"))
		b.Delete([]byte("gone"))
		b.Delete([]byte("gone-then-set"))
		b.Set([]byte("gone-then-set"), fmt.Append(nil, i))
		b.Set([]byte("new"), fmt.Append(nil, i))
		b.Delete([]byte("never-there"))
		proxy.StartLog()
		if _, err := b.CommitWatermark(ctx); err != nil {
			t.Fatal(err)
		}
		log := proxy.Log()
		if len(log) == 1 {
			oneTrip++
			if log[0].Syncs != 1 {
				t.Errorf("write %d's commit sends %d Syncs, so PostgreSQL answers it in as many pieces:\n\t%s", i, log[0].Syncs, strings.Join(log[0].Statements, "\n\t"))
			}
			writes := 0
			for _, st := range log[0].Statements {
				if strings.Contains(st, "INSERT INTO orrery_kv") || strings.HasPrefix(st, "DELETE FROM orrery_kv") {
					writes++
				}
			}
			if writes != 1 {
				t.Errorf("write %d's commit writes in %d statements, want 1:\n\t%s", i, writes, strings.Join(log[0].Statements, "\n\t"))
			}
			if len(log[0].Statements) < fewest {
				fewest, fewestLog = len(log[0].Statements), log[0].Statements
			}
		}
		want := map[string]string{"gone": "", "gone-then-set": fmt.Sprint(i), "kept": "old", "new": fmt.Sprint(i), "never-there": ""}
		for k, w := range want {
			v, err := s.Get(ctx, []byte(k))
			switch {
			case w == "" && !errors.Is(err, storage.ErrNotFound):
				t.Fatalf("write %d left %s as %q (%v), want it deleted", i, k, v, err)
			case w != "" && (err != nil || string(v) != w):
				t.Fatalf("write %d left %s as %q (%v), want %q", i, k, v, err, w)
			}
		}
		if i == 0 {
			seed := s.NewBatch()
			seed.Set([]byte("gone"), []byte("old"))
			if err := seed.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if oneTrip == 0 {
		t.Fatal("no commit took one round trip")
	}
	if fewest > 4 {
		t.Errorf("a write's commit sends %d statements, want at most 4:\n\t%s", fewest, strings.Join(fewestLog, "\n\t"))
	}
}

// A point read's statement and a write's read of its keys are planned once
// per connection, not at every execution (left to choose, PostgreSQL keeps
// the custom plan of a statement over an array parameter: the plan for the
// array given always looks cheaper than one for any array), and the plan,
// made here on a small table, reads by the primary key's index, so that it
// stays right as the table grows: an index scan, not a bitmap scan (a
// bitmap of the rows for a write's few keys costs the server about three
// times the execution), and so does the delete of a write's keys.
func TestPointAndKeyReadsArePlannedOncePerConnectionByTheKey(t *testing.T) {
	ctx := t.Context()
	s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	k1, k2 := []byte("plan/1"), []byte("plan/2")
	b := s.NewBatch()
	if err := b.Set(k1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, _, err := s.GetAll(ctx, [][]byte{k1, k2}); err != nil {
			t.Fatal(err)
		}
		sb, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Begin(ctx, nil, [][]byte{k1, k2}, false); err != nil {
			t.Fatal(err)
		}
		sb.Close()
	}
	conns := s.Pool().AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	seen := map[string]int64{}
	for _, c := range conns {
		rows, err := c.Query(ctx, `SELECT name, statement, generic_plans, custom_plans FROM pg_prepared_statements
			WHERE (statement LIKE 'SELECT%orrery_kv%' AND statement NOT LIKE '%pg_prepared_statements%'
				AND (statement LIKE '%ORDINALITY%' OR statement LIKE '%= ANY%'))
				OR statement LIKE 'DELETE FROM orrery_kv WHERE k = ANY%'`)
		if err != nil {
			t.Fatal(err)
		}
		type prepared struct {
			name, sql       string
			generic, custom int64
		}
		var stmts []prepared
		for rows.Next() {
			var p prepared
			if err := rows.Scan(&p.name, &p.sql, &p.generic, &p.custom); err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, p)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, p := range stmts {
			kind := "key read"
			switch {
			case strings.Contains(p.sql, "ORDINALITY"):
				kind = "point read"
			case strings.HasPrefix(p.sql, "DELETE"):
				kind = "delete"
			}
			seen[kind] += p.generic + p.custom
			if p.custom > 0 {
				t.Errorf("%s: %d executions planned each time (%d planned once): %s", kind, p.custom, p.generic, p.sql)
			}
			var plan strings.Builder
			rows, err := c.Query(ctx, fmt.Sprintf(`EXPLAIN EXECUTE %s('{}')`, p.name))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.String(), "orrery_kv_pkey") || strings.Contains(plan.String(), "Seq Scan") {
				t.Errorf("%s's plan does not read by the primary key:\n%s", kind, plan.String())
			}
			if strings.Contains(plan.String(), "Bitmap") {
				t.Errorf("%s's plan builds a bitmap of the rows, not an index scan:\n%s", kind, plan.String())
			}
		}
	}
	if seen["point read"] < 20 || seen["key read"] < 20 {
		t.Fatalf("executions found: %v, want 20 of each", seen)
	}
}

// A write's transaction is implicit (no BEGIN): nothing in its middle may
// send a Sync, which would end it, letting its locks go and committing
// half of it. An iterator's pages are read in its round trips (their
// statement prepared there, not by the driver, whose Prepare and queries
// end with a Sync): the locks hold across them until the write commits,
// and a write closed without a commit gives its locks back and leaves
// nothing behind, whether its transaction stayed implicit or had to be
// made explicit.
func TestWriteKeepsItsLocksAcrossAnIteratorUntilItCommits(t *testing.T) {
	ctx := t.Context()
	s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	part := []storage.LockRequest{{Key: []byte("partition"), Exclusive: true}}
	// taken reports whether another writer takes the partition's lock
	// within patience. A held lock is waited on until the deadline, so
	// "held" is asked with a short patience; a free lock is granted at
	// once, so "free" is asked with a patience a loaded machine's round
	// trip meets: a short one there fails when the Lock's round trip is
	// slow, not when the lock is held.
	taken := func(patience time.Duration) bool {
		b, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		wait, cancel := context.WithTimeout(ctx, patience)
		defer cancel()
		return b.Lock(wait, []byte("partition"), true) == nil
	}
	for _, end := range []string{"commit", "close"} {
		a, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Begin(ctx, part, [][]byte{[]byte("x-" + end)}, true); err != nil {
			t.Fatal(err)
		}
		if err := a.Set([]byte("x-"+end), []byte("1")); err != nil {
			t.Fatal(err)
		}
		it, err := a.NewIterator(ctx, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		// Locks of modes whose statement is not prepared before a
		// transaction opens: preparing it needs a Sync, so the
		// transaction is made explicit first.
		more := []storage.LockRequest{{Key: []byte("m1")}, {Key: []byte("m2")}, {Key: []byte("m3"), Exclusive: true}}
		if _, err := a.Begin(ctx, more, nil, false); err != nil {
			t.Fatal(err)
		}
		if taken(300 * time.Millisecond) {
			t.Fatalf("another writer took the partition's lock after the first one's iterator and more locks, before its %s", end)
		}
		if end == "commit" {
			if _, err := a.CommitWatermark(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			a.Close()
		}
		if !taken(30 * time.Second) {
			t.Fatalf("the partition's lock is still held after the writer's %s", end)
		}
		v, err := s.Get(ctx, []byte("x-"+end))
		switch {
		case end == "commit" && (err != nil || string(v) != "1"):
			t.Fatalf("after the commit x = %q, %v; want 1", v, err)
		case end == "close" && !errors.Is(err, storage.ErrNotFound):
			t.Fatalf("after a close without commit x = %q, %v; want it absent", v, err)
		}
	}
}

// A query page reads in a snapshot: opened with its checks (the catalog
// version, the watermark), then a page of entries and the items they
// name. Its transaction is read-only: the ROLLBACK that ends it rides with
// the next snapshot's BEGIN on its connection (see lingerFor), so a page
// is three round trips, not four, all the store's own (see snapshot):
// every statement bound by reference to one prepared on the connection,
// one Sync each, no Describe (the driver's query layer described the
// BEGIN's portal each time and sent the ROLLBACK as a query of the simple
// protocol, in a round trip of its own). Each snapshot is a new one: it
// sees what was committed before it opened, though its connection's
// previous snapshot did not, and nothing committed after.
func TestAQueryPageIsThreeRoundTripsOfPreparedStatements(t *testing.T) {
	ctx := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	s, err := postgres.Open(context.Background(), proxy.URL(t, raw), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	commit := func(kv ...string) {
		t.Helper()
		b := s.NewBatch()
		for i := 0; i < len(kv); i += 2 {
			if err := b.Set([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	commit("version", "v1", "entry/1", "item/1", "entry/2", "item/2", "item/1", "one")
	var best []pgtest.Trip
	found := false
	for i := range 8 {
		want := fmt.Sprint("two ", i)
		commit("item/2", want)
		proxy.StartLog()
		snap, values, w, err := s.SnapshotAll(ctx, [][]byte{[]byte("version"), []byte("absent")})
		if err != nil {
			t.Fatal(err)
		}
		if string(values[0]) != "v1" || values[1] != nil || w == 0 {
			t.Fatalf("the snapshot's checks read %q, %q and watermark %d", values[0], values[1], w)
		}
		// Committed after the snapshot opened: not seen in it.
		commit("item/2", "changed", "entry/3", "item/3")
		it, err := snap.NewIterator(ctx, []byte("entry/"), []byte("entry0"), false)
		if err != nil {
			t.Fatal(err)
		}
		var items [][]byte
		for it.Next() {
			items = append(items, append([]byte{}, it.Value()...))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		got, err := storage.GetMany(ctx, snap, items)
		if err != nil {
			t.Fatal(err)
		}
		if err := snap.Close(); err != nil {
			t.Fatal(err)
		}
		log := proxy.Log()
		if len(got) != 2 || string(got[0]) != "one" || string(got[1]) != want {
			t.Fatalf("snapshot %d read items %q, want [one %q]: what was committed before it opened, nothing after", i, got, want)
		}
		b := s.NewBatch()
		if err := b.Delete([]byte("entry/3")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var mine []pgtest.Trip
		for _, trip := range log {
			if trip.Conn == log[0].Conn {
				mine = append(mine, trip)
			}
		}
		ok := len(mine) == 3 && len(mine[0].Statements) > 0 && mine[0].Statements[0] == "ROLLBACK"
		for _, trip := range mine {
			ok = ok && trip.Describes == 0 && trip.Syncs == 1
		}
		if ok {
			found = true
			break
		}
		if best == nil || len(mine) < len(best) {
			best = mine
		}
	}
	if !found {
		var b strings.Builder
		for _, trip := range best {
			fmt.Fprintf(&b, "\n\t%d Describes, %d Syncs: %s", trip.Describes, trip.Syncs, strings.Join(trip.Statements, "; "))
		}
		t.Errorf("no query page was three round trips of prepared statements, one Sync each, without a Describe, the previous snapshot's ROLLBACK in the first; the closest:%s", b.String())
	}
}

// A snapshot's connection that lingers in its transaction for the next
// snapshot (see lingerFor) does so briefly: with no snapshot after it,
// its transaction ends and the connection goes back to the pool, so that
// no session stays idle in a transaction, holding back the server's
// horizon of old row versions; and the store closes with connections
// lingering.
func TestALingeringSnapshotEndsItsTransactionWhenNoneFollows(t *testing.T) {
	ctx := t.Context()
	s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var snaps []storage.Snapshot
	for range 3 {
		snap, _, _, err := s.SnapshotAll(ctx, [][]byte{[]byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
	}
	for _, snap := range snaps {
		snap.Close()
	}
	idleInTx := func() int {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for idleInTx() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still idle in a transaction 30 s after their snapshots closed", idleInTx())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conns := s.Pool().AcquireAllIdle(ctx)
	for _, c := range conns {
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("a connection back in the pool is in a transaction (status %c)", st)
		}
		c.Release()
	}
	if len(conns) < 3 {
		t.Errorf("%d connections back in the pool, want the 3 snapshots' at least", len(conns))
	}
	// Lingering again at Close: Close ends them (a hang here fails the test by its timeout).
	for range 2 {
		snap, _, _, err := s.SnapshotAll(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
