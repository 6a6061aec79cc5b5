package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// sharedPairs opens two engines, as two gateways, on two handles of one
// shared store of the pass (newTestShared): the in-process one, then
// PostgreSQL. The database and container are created on A after both are
// open, so B knows them only through the store.
func sharedPairs(t *testing.T, test func(t *testing.T, a, b *Engine)) {
	_, open := newTestShared(t)
	a, b := openPairOn(t, open(), open())
	test(t, a, b)
}

func openPairOn(t *testing.T, sa, sb storage.Shared) (a, b *Engine) {
	ctx := t.Context()
	t.Helper()
	var err error
	if a, err = Open(ctx, sa, Options{SweepInterval: -1}); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(ctx, sb, Options{SweepInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
		sa.Close()
		sb.Close()
	})
	if _, err := a.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestSharedCreateRacedOnTwoGatewaysHasOneWinner(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		for i := range 40 {
			body := fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i%3)
			var wg sync.WaitGroup
			status := make([]int, 2)
			for j, e := range []*Engine{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := e.CreateItem(ctx, req("", fmt.Sprint("p", i%3), body))
					if err != nil {
						status[j] = statusOf(err)
					} else {
						status[j] = res.Status
					}
				}()
			}
			wg.Wait()
			if !(status[0] == 201 && status[1] == 409 || status[0] == 409 && status[1] == 201) {
				t.Fatalf("item %d created on both gateways at once: statuses %v, want one 201 and one 409", i, status)
			}
		}
	})
}

func TestSharedCatalogChangesAreSeenByTheOtherGatewayAtOnce(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		// The container made on A (after B opened) takes writes on B.
		if _, err := b.CreateItem(ctx, req("", "p", `{"id":"1","pk":"p"}`)); err != nil {
			t.Fatalf("create on B in a container made on A: %v", err)
		}
		if res, err := a.ReadItem(ctx, req("1", "p", "")); err != nil || res.Status != 200 {
			t.Fatalf("read on A of B's item: %v", err)
		}
		// A second container, made on B, is listed and used on A.
		if _, err := b.CreateContainer(ctx, "db", []byte(`{"id":"c2","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
			t.Fatal(err)
		}
		r := req("", "p", `{"id":"x","pk":"p"}`)
		r.Container = "c2"
		if _, err := a.CreateItem(ctx, r); err != nil {
			t.Fatalf("create on A in a container made on B: %v", err)
		}
		// Deleted on B, it is gone on A at once, writes included.
		if err := b.DeleteContainer(ctx, "db", "c2", ""); err != nil {
			t.Fatal(err)
		}
		r = req("", "p", `{"id":"y","pk":"p"}`)
		r.Container = "c2"
		if _, err := a.CreateItem(ctx, r); statusOf(err) != 404 {
			t.Fatalf("create on A in a container deleted on B: %v, want 404", err)
		}
		if _, err := a.ReadContainer(ctx, "db", "c2"); statusOf(err) != 404 {
			t.Fatalf("read on A of a container deleted on B: %v, want 404", err)
		}
		// A database made on A conflicts on B.
		if _, err := a.CreateDatabase(ctx, []byte(`{"id":"db2"}`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateDatabase(ctx, []byte(`{"id":"db2"}`), nil); statusOf(err) != 409 {
			t.Fatalf("creating on B a database made on A: %v, want 409", err)
		}
	})
}

func TestSharedChangeFeedOnOneGatewaySeesEveryWriteOfBoth(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		const writers, each = 4, 30
		var wg sync.WaitGroup
		for w := range writers {
			e := a
			if w%2 == 1 {
				e = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					id := fmt.Sprintf("w%d-%d", w, i)
					if _, err := e.CreateItem(ctx, req("", fmt.Sprint("p", i%5), `{"id":"`+id+`","pk":"p`+fmt.Sprint(i%5)+`"}`)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		seen := map[string]int{}
		cf := ChangeFeedRequest{Database: "db", Container: "c"}
		read := func() {
			res, err := a.ReadChangeFeed(ctx, &cf)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range res.Items {
				var d struct{ ID string }
				json.Unmarshal(doc, &d)
				seen[d.ID]++
			}
			cf.Continuation = res.ETag
		}
		for {
			select {
			case <-done:
			default:
				read()
				continue
			}
			break
		}
		for range 3 {
			read()
		}
		for w := range writers {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if seen[id] != 1 {
					t.Errorf("item %s seen %d times in A's change feed, want once", id, seen[id])
				}
			}
		}
	})
}

// TestSharedChangeFeedShowsWritesAcknowledgedOnAnotherGateway: a write
// acknowledged on gateway A is in the change feed that gateway B reads
// next, though an older transaction (a slow writer's on A, holding its
// sequence number) is still open when B's read begins, so that the
// store's watermark is below A's write: B's read waits for the older
// transaction, as a read on A does, instead of answering without A's
// write. (B knows nothing of A's writes: it learns from its first
// snapshot what had ended on any gateway, storage.Ended.)
func TestSharedChangeFeedShowsWritesAcknowledgedOnAnotherGateway(t *testing.T) {
	skipOnPlaced(t, "a read of one place waits only for what its own gateway finished there")
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		held, release := holdLSN(t, a, "c", "slow")
		if _, err := a.CreateItem(ctx, req("", "p", `{"id":"1","pk":"p"}`)); err != nil {
			t.Fatal(err)
		}
		waited := false
		b.shared.onSettleWait = func() {
			waited = true
			release()
		}
		f, err := b.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Items) != 1 {
			t.Fatalf("B's change feed has %d items (waited for the open transaction: %v), want the write A acknowledged while sequence number %d was open",
				len(f.Items), waited, held)
		}
	})
}

func TestSharedCounterWithETagsOnBothGatewaysIsExact(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		if _, err := a.CreateItem(ctx, req("", "p", `{"id":"n","pk":"p","n":0}`)); err != nil {
			t.Fatal(err)
		}
		const workers, each = 6, 15
		var wg sync.WaitGroup
		for w := range workers {
			e := a
			if w%2 == 1 {
				e = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := 0; done < each; {
					cur, err := e.ReadItem(ctx, req("n", "p", ""))
					if err != nil {
						t.Error(err)
						return
					}
					var doc struct{ N int }
					json.Unmarshal(cur.Body, &doc)
					r := req("n", "p", fmt.Sprintf(`{"id":"n","pk":"p","n":%d}`, doc.N+1))
					r.IfMatch = cur.ETag
					_, err = e.ReplaceItem(ctx, r)
					switch statusOf(err) {
					case 0:
						done++
					case 412:
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		res, err := b.ReadItem(ctx, req("n", "p", ""))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ N int }
		json.Unmarshal(res.Body, &doc)
		if doc.N != workers*each {
			t.Fatalf("counter = %d after %d conditional increments on two gateways", doc.N, workers*each)
		}
	})
}

// On a shared store the TTL sweep runs under the duty "ttl": while the two
// engines run, one of them holds it (another process cannot take it), and
// expired items are swept; once both close, the duty is free.
func TestSharedTTLSweepRunsUnderTheDuty(t *testing.T) {
	ctx := t.Context()
	store, open := newTestShared(t)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var engines []*Engine
	for _, s := range []storage.Shared{store, open()} {
		e, err := Open(ctx, s, Options{Now: clock, SweepInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
		defer s.Close()
		defer e.Close()
	}
	a, b := engines[0], engines[1]
	if _, err := a.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":5}`), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.CreateItem(ctx, req("", "p", fmt.Sprintf(`{"id":"%d","pk":"p"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	other := open()
	// An engine takes the duty as its sweeper starts: from then on another
	// process waits for it.
	for start := time.Now(); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, release, err := other.Lead(ctx, "ttl")
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		release()
		if time.Since(start) > 30*time.Second {
			t.Fatal("no engine took the duty ttl within 30 s: another process takes it at will")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for countKeys(t, store, []byte{keys.Item}) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("expired items still stored 30 s after they expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Close()
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, release, err := other.Lead(ctx, "ttl")
	if err != nil {
		t.Fatalf("Lead(ttl) after both engines closed: %v", err)
	}
	release()
}

func countKeys(t *testing.T, s storage.Reader, prefix []byte) int {
	ctx := t.Context()
	t.Helper()
	it, err := s.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	return n
}

// A replace on A that changes the indexing policy rebuilds the index while
// B, which reloads the catalog at once, keeps answering queries: B scans
// until the rebuild is done, and never answers from the half-built index.
func TestSharedQueriesOnTheOtherGatewayDuringAReindexAreComplete(t *testing.T) {
	ctx := t.Context()
	store, open := newTestShared(t)
	a, b := openPairOn(t, store, open())
	narrow := `{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":"/a/?"}],"excludedPaths":[{"path":"/*"}]}}`
	wide := `{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[]}}`
	if _, err := a.CreateContainer(ctx, "db", []byte(narrow), nil); err != nil {
		t.Fatal(err)
	}
	const n = 6000
	for i := range n {
		r := req("", "p", fmt.Sprintf(`{"id":"%d","pk":"p","b":%d}`, i, i%50))
		r.Container = "r"
		if _, err := a.CreateItem(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		got, cont := 0, ""
		for {
			res, err := b.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "r",
				Query: "SELECT VALUE c.id FROM c WHERE c.b = 7", MaxItems: 1000, Continuation: cont,
				PartitionKey: StringKey("p"), HasPartitionKey: true})
			if err != nil {
				t.Fatal(err)
			}
			got += len(res.Items)
			if cont = res.Continuation; cont == "" {
				return got
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.ReplaceContainer(ctx, "db", "r", []byte(wide), "")
		done <- err
	}()
	queries := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if got := count(); got != n/50 {
				t.Fatalf("B's query after the reindex found %d items, want %d", got, n/50)
			}
			t.Logf("%d queries on B during the reindex", queries)
			return
		default:
		}
		if got := count(); got != n/50 {
			t.Fatalf("B's query during A's reindex found %d items, want %d", got, n/50)
		}
		queries++
	}
}

// Catalog changes and writers share a small pool without waiting on each
// other: a catalog change holds the catalog lock while writers wait for it
// holding their connections, so it must need no further one to finish.
func TestSharedCatalogChangesAmidWritersOnASmallPoolFinish(t *testing.T) {
	ctx := t.Context()
	if !testOnPostgres {
		t.Skip("a PostgreSQL pool's: runs in the PostgreSQL pass")
	}
	url := pgtest.URL(t)
	sa, err := postgres.Open(context.Background(), url, postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := postgres.Open(context.Background(), url, postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, b := openPairOn(t, sa, sb)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		e := a
		if w%2 == 1 {
			e = b
		}
		wg.Go(func() {
			for i := range 15 {
				if _, err := e.UpsertItem(ctx, req("", fmt.Sprint("p", w), fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, w))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 4 {
			body := fmt.Sprintf(`{"id":"c%d","partitionKey":{"paths":["/pk"]}}`, i)
			if _, err := a.CreateContainer(ctx, "db", []byte(body), &Throughput{Manual: 400}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("writers and container creates on a pool of 4 still running after 60 s: they wait on each other")
	}
}

// A TTL sweeper stops for good once its engine's store is closed, instead
// of retrying (and warning) at every tick or every second for as long as
// the engine lives: on a store of the pass (memory's sweeper, then a
// PostgreSQL gateway's) and on a shared store (a gateway's, which takes
// the sweep duty first).
func TestSweeperStopsWhenItsStoreIsClosed(t *testing.T) {
	ctx := t.Context()
	shared, _ := newTestShared(t)
	logs := map[string]*logSink{}
	for name, store := range map[string]storage.Store{"store": newTestStore(t), "shared store": shared} {
		logs[name] = &logSink{}
		e, err := Open(ctx, store, Options{SweepInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs[name], nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
		createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":5}`)
		store.Close()
	}
	// Before, a warning came every tick, or every second while taking the
	// duty failed: at least two in this time.
	time.Sleep(2500 * time.Millisecond)
	for name, l := range logs {
		if n := strings.Count(l.String(), "failed"); n > 1 {
			t.Errorf("on a closed %s the sweeper failed %d times:\n%s", name, n, l)
		}
	}
}

// A created item's record and index entries are written as new
// (txn.insert): a key that exists anyway, here the index entries a lost
// record left behind, makes the store refuse the commit, and the write is
// run again writing them by Set, from reads made afresh under the locks,
// so the create succeeds, indexed, and nothing it wrote is lost.
func TestSharedCreateOverStaleIndexEntriesIsRunAgainNotRefused(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		body := `{"id":"x","pk":"p","v":7}`
		if _, err := a.CreateItem(ctx, req("", "p", body)); err != nil {
			t.Fatal(err)
		}
		// The record removed alone: its index entries stay.
		c, err := a.Container(ctx, "db", "c")
		if err != nil {
			t.Fatal(err)
		}
		p, _ := c.partition(StringKey("p"))
		wb := a.store.NewBatch()
		if err := wb.Delete(p.itemKey("x")); err != nil {
			t.Fatal(err)
		}
		if err := wb.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for i, e := range []*Engine{b, a} {
			res, err := e.CreateItem(ctx, req("", "p", body))
			if err != nil || res.Status != 201 {
				t.Fatalf("creating the item over its stale index entries (%d): %v", i, err)
			}
			if got := queryIDs(t, e, "c", "SELECT VALUE c.id FROM c WHERE c.v = 7"); !slices.Equal(got, []string{"x"}) {
				t.Fatalf("the query on the index finds %q, want [x]", got)
			}
			if _, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "x", PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
				t.Fatal(err)
			}
			// Its record removed alone again, for the other gateway.
			if _, err := a.CreateItem(ctx, req("", "p", body)); err != nil {
				t.Fatal(err)
			}
			wb := a.store.NewBatch()
			if err := wb.Delete(p.itemKey("x")); err != nil {
				t.Fatal(err)
			}
			if err := wb.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
