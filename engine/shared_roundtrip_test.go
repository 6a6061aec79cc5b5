package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// tripsEngine opens an engine on PostgreSQL through a proxy that counts
// round trips, with the test's database and container created.
func tripsEngine(t testing.TB) (*Engine, *pgtest.Proxy) {
	t.Helper()
	if err := pgtest.Available(); err != nil {
		pgtest.Skip(t, err)
	}
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, url))
	s, err := postgres.Open(context.Background(), proxy.URL(t, url), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return openTestEngine(t, s), proxy
}

// itemRequest runs an item operation as the server does: the container
// looked up for the response's headers, the operation, and the session
// token, asked of the engine when the operation did not bring it (a 404,
// 409 or 412 carries one too).
func itemRequest(ctx context.Context, e *Engine, op func() (*ItemResult, error)) (*ItemResult, uint64, error) {
	if _, err := e.CachedContainer(ctx, "db", "c"); err != nil {
		return nil, 0, err
	}
	res, err := op()
	if err != nil {
		if ce, ok := AsError(err); ok && (ce.Status == 404 || ce.Status == 409 || ce.Status == 412) && ce.SessionLSN == 0 {
			if _, serr := e.SessionLSN(ctx); serr != nil {
				return nil, 0, serr
			}
		}
		return nil, 0, err
	}
	session := res.SessionLSN
	if session == 0 {
		if session, err = e.SessionLSN(ctx); err != nil {
			return nil, 0, err
		}
	}
	return res, session, nil
}

// batchRequest runs a transactional batch of ops in partition "p" as the
// server does (see itemRequest); it returns the result and the session
// LSN the server would send.
func batchRequest(ctx context.Context, e *Engine, ops []string) (*BatchResult, uint64, error) {
	parsed, err := ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
	if err != nil {
		return nil, 0, err
	}
	if _, err := e.CachedContainer(ctx, "db", "c"); err != nil {
		return nil, 0, err
	}
	res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true, Atomic: true, Operations: parsed})
	if err != nil {
		return nil, 0, err
	}
	session := res.SessionLSN
	if session == 0 {
		if session, err = e.SessionLSN(ctx); err != nil {
			return nil, 0, err
		}
	}
	return res, session, nil
}

// fewestTrips is the fewest round trips of several runs of do: the first
// run on each connection of the pool prepares the statements it sends.
func fewestTrips(t *testing.T, proxy *pgtest.Proxy, do func() error) int64 {
	t.Helper()
	n := int64(1 << 30)
	for range 8 {
		before := proxy.RoundTrips()
		if err := do(); err != nil {
			t.Fatal(err)
		}
		n = min(n, proxy.RoundTrips()-before)
	}
	return n
}

// TestSharedItemRequestsMakeNoExtraRoundTrips: on PostgreSQL an item
// request's catalog check and session token ride with its own statements.
// A point read is one round trip (the item, the catalog version and the
// watermark in one statement); a write is two: the locks with the catalog
// version, the item's read and the sequence number, then the writes with
// the COMMIT and the watermark; one with a trigger three (the trigger is
// read with the catalog check). (Query and change-feed pages:
// TestSharedPagesMakeNoExtraRoundTrips.)
func TestSharedItemRequestsMakeNoExtraRoundTrips(t *testing.T) {
	ctx := t.Context()
	e, proxy := tripsEngine(t)
	if _, err := e.CreateItem(ctx, req("", "p", `{"id":"x","pk":"p","n":0}`)); err != nil {
		t.Fatal(err)
	}
	stamp := `function () { var r = getContext().getRequest(), d = r.getBody(); d.stamped = true; r.setBody(d); }`
	if _, err := e.CreateScript(ctx, "db", "c", Triggers, fmt.Appendf(nil, `{"id":"stamp","body":%q,"triggerType":"Pre","triggerOperation":"All"}`, stamp)); err != nil {
		t.Fatal(err)
	}
	i := 0
	etag := ""
	cases := []struct {
		name    string
		most    int64
		prepare func() error
		op      func() (*ItemResult, error)
		status  int // the error's, 0 for none
	}{
		{"PointRead", 1, nil, func() (*ItemResult, error) { return e.ReadItem(ctx, req("x", "p", "")) }, 0},
		{"PointReadNotFound", 1, nil, func() (*ItemResult, error) { return e.ReadItem(ctx, req("absent", "p", "")) }, 404},
		{"Create", 2, nil, func() (*ItemResult, error) {
			i++
			return e.CreateItem(ctx, req("", "p", fmt.Sprintf(`{"id":"c%d","pk":"p"}`, i)))
		}, 0},
		{"Upsert", 2, nil, func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "p", `{"id":"u","pk":"p"}`)) }, 0},
		{"ReplaceWithETag", 2, func() error {
			cur, err := e.ReadItem(ctx, req("x", "p", ""))
			if err == nil {
				etag = cur.ETag
			}
			return err
		}, func() (*ItemResult, error) {
			r := req("x", "p", `{"id":"x","pk":"p","n":1}`)
			r.IfMatch = etag
			return e.ReplaceItem(ctx, r)
		}, 0},
		{"Patch", 2, nil, func() (*ItemResult, error) {
			return e.PatchItem(ctx, req("x", "p", `{"operations":[{"op":"incr","path":"/n","value":1}]}`))
		}, 0},
		// The trigger is read with the catalog check, the item with the
		// locks.
		{"UpsertWithPreTrigger", 3, nil, func() (*ItemResult, error) {
			r := req("", "p", `{"id":"t","pk":"p"}`)
			r.PreTriggers = []string{"stamp"}
			res, err := e.UpsertItem(ctx, r)
			if err == nil && !strings.Contains(string(res.Body), `"stamped":true`) {
				err = fmt.Errorf("the pre-trigger did not run: %s", res.Body)
			}
			return res, err
		}, 0},
	}
	for _, c := range cases {
		n := int64(1 << 30)
		for range 8 {
			if c.prepare != nil {
				if err := c.prepare(); err != nil {
					t.Fatal(err)
				}
			}
			before := proxy.RoundTrips()
			if _, _, err := itemRequest(ctx, e, c.op); statusOf(err) != c.status {
				t.Fatalf("%s: %v, want status %d", c.name, err, c.status)
			}
			n = min(n, proxy.RoundTrips()-before)
		}
		t.Logf("%s: %d round trips", c.name, n)
		if n > c.most {
			t.Errorf("%s takes %d round trips to PostgreSQL, want at most %d", c.name, n, c.most)
		}
	}
}

// TestSharedPagesMakeNoExtraRoundTrips: on PostgreSQL a query page or a
// change-feed page checks the catalog and reads its session token (and
// the feed its watermark) in the round trip that opens its snapshot, and
// reads the items its index, order or feed entries name in one statement,
// not one each: a page of a few items, in one partition or across them,
// is three round trips (the snapshot with the checks, the entries, the
// items; the snapshot's ROLLBACK goes with the next snapshot's opening on
// its connection), and so is a page of the read feed; a change feed with
// nothing new one, and one in all versions mode, whose records hold the
// items, two. The server makes
// none of its own besides (the container from the cache, the session
// token from the result).
func TestSharedPagesMakeNoExtraRoundTrips(t *testing.T) {
	ctx := t.Context()
	e, proxy := tripsEngine(t)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"v","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":10}}`), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		for _, coll := range []string{"c", "v"} {
			r := req("", fmt.Sprint("p", i%3), fmt.Sprintf(`{"id":"i%d","pk":"p%d","n":%d}`, i, i%3, i))
			r.Container = coll
			if _, err := e.CreateItem(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	query := func(text string, pk bool, want int) func() error {
		return func() error {
			r := &QueryRequest{Database: "db", Container: "c", Query: text}
			if pk {
				r.PartitionKey, r.HasPartitionKey = StringKey("p1"), true
			}
			res, err := e.QueryItems(context.Background(), r)
			if err != nil {
				return err
			}
			if len(res.Items) != want {
				return fmt.Errorf("%s: %d items, want %d", text, len(res.Items), want)
			}
			if res.SessionLSN == 0 {
				return fmt.Errorf("%s: no session LSN with the page", text)
			}
			return nil
		}
	}
	var latest string
	feed := func(coll string, mode ChangeFeedMode, continuation *string, pk bool, want int) func() error {
		return func() error {
			r := &ChangeFeedRequest{Database: "db", Container: coll, Mode: mode}
			if continuation != nil {
				r.Continuation = *continuation
			}
			if pk {
				r.PartitionKey, r.HasPartitionKey = StringKey("p1"), true
			}
			res, err := e.ReadChangeFeed(ctx, r)
			if err != nil {
				return err
			}
			if len(res.Items) != want {
				return fmt.Errorf("change feed of %s: %d items, want %d", coll, len(res.Items), want)
			}
			if res.SessionLSN == 0 {
				return fmt.Errorf("change feed of %s: no session LSN with the page", coll)
			}
			latest = res.ETag
			return nil
		}
	}
	readFeed := func(pk bool, want int) func() error {
		return func() error {
			r := &FeedRequest{Database: "db", Container: "c"}
			if pk {
				r.PartitionKey, r.HasPartitionKey = StringKey("p1"), true
			}
			res, err := e.ReadFeed(ctx, r)
			if err != nil {
				return err
			}
			if len(res.Items) != want {
				return fmt.Errorf("read feed: %d items, want %d", len(res.Items), want)
			}
			if res.SessionLSN == 0 {
				return fmt.Errorf("read feed: no session LSN with the page")
			}
			return nil
		}
	}
	start := `"1"`
	cases := []struct {
		name string
		most int64
		do   func() error
	}{
		{"QueryOnePartition", 3, query("SELECT * FROM c", true, 4)},
		{"QueryOnePartitionFilter", 3, query("SELECT * FROM c WHERE c.n > 3", true, 3)},
		{"QueryOnePartitionOrderBy", 3, query("SELECT * FROM c ORDER BY c.n DESC", true, 4)},
		{"QueryCrossPartitionFilter", 3, query("SELECT * FROM c WHERE c.n >= 2", false, 10)},
		{"QueryCrossPartitionPoint", 3, query("SELECT * FROM c WHERE c.id = 'i4'", false, 1)},
		{"ChangeFeedOnePartition", 3, feed("c", LatestVersion, nil, true, 4)},
		{"ChangeFeedFromContinuation", 3, feed("c", LatestVersion, &start, false, 12)},
		{"ChangeFeedNothingNew", 1, feed("c", LatestVersion, &latest, false, 0)},
		{"ChangeFeedAllVersions", 2, feed("v", AllVersionsAndDeletes, &start, false, 12)},
		{"ReadFeedOnePartition", 3, readFeed(true, 4)},
		{"ReadFeed", 3, readFeed(false, 12)},
	}
	for _, c := range cases {
		n := fewestTrips(t, proxy, c.do)
		t.Logf("%s: %d round trips", c.name, n)
		if n > c.most {
			proxy.StartLog()
			if err := c.do(); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			for _, trip := range proxy.Log() {
				fmt.Fprintf(&log, "\n\t%s", strings.Join(trip.Statements, "; "))
			}
			t.Errorf("%s takes %d round trips to PostgreSQL, want at most %d; they were:%s", c.name, n, c.most, log.String())
		}
	}
}

// TestSharedItemRequestsFromTheCacheAreNeverStale: item requests look the
// container up in the catalog cache without asking the store, yet a
// container deleted on A is gone for B's reads and writes at once, and one
// made again on A with another partition key is read and written on B by
// the new definition; the session tokens they carry never go back.
func TestSharedItemRequestsFromTheCacheAreNeverStale(t *testing.T) {
	skipOnPlaced(t, "session LSNs are a place's: the container made again may live in another place, whose numbers are lower")
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		var last uint64
		session := func(what string, res *ItemResult) {
			t.Helper()
			if res.SessionLSN == 0 {
				t.Fatalf("%s: no session LSN with the result", what)
			}
			if res.SessionLSN < last {
				t.Fatalf("%s: session LSN %d, below the %d of an earlier request", what, res.SessionLSN, last)
			}
			last = res.SessionLSN
		}
		for round := range 3 {
			res, err := a.CreateItem(ctx, req("", "p", `{"id":"1","pk":"p"}`))
			if err != nil {
				t.Fatal(err)
			}
			session("create on A", res)
			if res, err = b.ReadItem(ctx, req("1", "p", "")); err != nil {
				t.Fatalf("round %d: read on B: %v", round, err)
			}
			session("read on B", res)
			if res, err = b.PatchItem(ctx, req("1", "p", `{"operations":[{"op":"add","path":"/b","value":1}]}`)); err != nil {
				t.Fatalf("round %d: patch on B: %v", round, err)
			}
			session("patch on B", res)
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := b.ReadItem(ctx, req("1", "p", "")); statusOf(err) != 404 {
				t.Fatalf("round %d: read on B of an item of a container deleted on A: %v, want 404", round, err)
			}
			if _, err := b.ReplaceItem(ctx, req("1", "p", `{"id":"1","pk":"p"}`)); statusOf(err) != 404 {
				t.Fatalf("round %d: replace on B in a container deleted on A: %v, want 404", round, err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/other"]}}`), nil); err != nil {
				t.Fatal(err)
			}
			// B's cache still has /pk: the new definition must win.
			r := req("", "q", `{"id":"2","other":"q"}`)
			if res, err = b.CreateItem(ctx, r); err != nil {
				t.Fatalf("round %d: create on B by the new partition key: %v", round, err)
			}
			session("create on B", res)
			if res, err = a.ReadItem(ctx, req("2", "q", "")); err != nil {
				t.Fatalf("round %d: read on A of B's item: %v", round, err)
			}
			session("read on A", res)
			if _, err := b.ReadItem(ctx, req("1", "p", "")); statusOf(err) != 404 {
				t.Fatalf("round %d: read on B of the old container's item: %v, want 404", round, err)
			}
			// Made again on A while B's cache has /other: B's write by
			// /pk would be refused by the cached definition.
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
			if res, err = b.CreateItem(ctx, req("", "p", `{"id":"3","pk":"p"}`)); err != nil {
				t.Fatalf("round %d: create on B by the partition key of the container made again on A: %v", round, err)
			}
			session("create on B", res)
			if err := b.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.ReadItem(ctx, req("3", "p", "")); statusOf(err) != 404 {
				t.Fatalf("round %d: read on A of an item of a container deleted on B: %v, want 404", round, err)
			}
			if _, err := b.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSharedPagesFromTheCacheAreNeverStale: query, change-feed and
// read-feed pages take the container from the catalog cache and check it
// in their snapshot's round trip, yet a container deleted on A is 404 for
// B's pages at once, and one made again on A (another partition key) is
// read on B by the new definition, never the old container's items; the
// session tokens the pages carry never go back.
func TestSharedPagesFromTheCacheAreNeverStale(t *testing.T) {
	skipOnPlaced(t, "session LSNs are a place's: the container made again may live in another place, whose numbers are lower")
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		var last uint64
		session := func(what string, lsn uint64) {
			t.Helper()
			if lsn == 0 {
				t.Fatalf("%s: no session LSN with the page", what)
			}
			if lsn < last {
				t.Fatalf("%s: session LSN %d, below the %d of an earlier page", what, lsn, last)
			}
			last = lsn
		}
		pages := func(e *Engine, want string) error {
			q, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: "SELECT VALUE c.id FROM c"})
			if err != nil {
				return err
			}
			session("query", q.SessionLSN)
			f, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c"})
			if err != nil {
				return err
			}
			session("change feed", f.SessionLSN)
			r, err := e.ReadFeed(ctx, &FeedRequest{Database: "db", Container: "c"})
			if err != nil {
				return err
			}
			session("read feed", r.SessionLSN)
			if len(q.Items) != 1 || string(q.Items[0]) != `"`+want+`"` || len(f.Items) != 1 || len(r.Items) != 1 {
				return fmt.Errorf("query %s, change feed %d items, read feed %d items; want item %s alone", q.Items, len(f.Items), len(r.Items), want)
			}
			return nil
		}
		for round := range 3 {
			if _, err := a.CreateItem(ctx, req("", "p", `{"id":"1","pk":"p"}`)); err != nil {
				t.Fatal(err)
			}
			if err := pages(b, "1"); err != nil {
				t.Fatalf("round %d: pages on B: %v", round, err)
			}
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := b.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c"}); statusOf(err) != 404 {
				t.Fatalf("round %d: query on B of a container deleted on A: %v, want 404", round, err)
			}
			if _, err := b.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c"}); statusOf(err) != 404 {
				t.Fatalf("round %d: change feed on B of a container deleted on A: %v, want 404", round, err)
			}
			if _, err := b.ReadFeed(ctx, &FeedRequest{Database: "db", Container: "c"}); statusOf(err) != 404 {
				t.Fatalf("round %d: read feed on B of a container deleted on A: %v, want 404", round, err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/other"]}}`), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CreateItem(ctx, req("", "q", `{"id":"2","other":"q"}`)); err != nil {
				t.Fatal(err)
			}
			if err := pages(b, "2"); err != nil {
				t.Fatalf("round %d: pages on B of the container made again on A: %v", round, err)
			}
			if err := b.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSharedStoredProcedureQueryReadsItsItemsInOneGo: on PostgreSQL a
// stored procedure's query reads the items its index entries name in one
// statement under the procedure's transaction, as a client's query does,
// not one round trip each: a chunk of 32 items first, then up to 256 (see
// lookupChunk), so reading 100 items costs one round trip more than
// reading 2.
func TestSharedStoredProcedureQueryReadsItsItemsInOneGo(t *testing.T) {
	ctx := t.Context()
	e, proxy := tripsEngine(t)
	const items = 100
	for i := range items {
		if _, err := e.CreateItem(ctx, req("", "p", fmt.Sprintf(`{"id":"i%d","pk":"p","n":%d}`, i, i))); err != nil {
			t.Fatal(err)
		}
	}
	body := `function (from) {
		var c = getContext().getCollection();
		var ok = c.queryDocuments(c.getSelfLink(), {query: "SELECT * FROM c WHERE c.n >= @from", parameters: [{name: "@from", value: from}]}, {pageSize: -1},
			function (err, docs) { if (err) throw err; getContext().getResponse().setBody(docs.length); });
		if (!ok) throw new Error("not accepted");
	}`
	if _, err := e.CreateScript(ctx, "db", "c", StoredProcedures, fmt.Appendf(nil, `{"id":"count","body":%q}`, body)); err != nil {
		t.Fatal(err)
	}
	pk, _ := ParsePartitionKeyHeader(`["p"]`)
	run := func(from, want int) func() error {
		return func() error {
			res, err := e.ExecuteStoredProcedure(ctx, &ExecuteRequest{Database: "db", Container: "c", ID: "count",
				PartitionKey: pk, HasPartitionKey: true, Args: []json.RawMessage{fmt.Append(nil, from)}})
			if err != nil {
				return err
			}
			if got := string(res.Body); got != fmt.Sprint(want) {
				return fmt.Errorf("the procedure counted %s items from %d, want %d", got, from, want)
			}
			return nil
		}
	}
	few := fewestTrips(t, proxy, run(items-2, 2))
	all := fewestTrips(t, proxy, run(0, items))
	t.Logf("a procedure's query: %d round trips reading 2 items, %d reading %d", few, all, items)
	// The script with the catalog check, the locks with the sequence, the
	// index entries, the items, the ROLLBACK.
	if few > 5 {
		t.Errorf("a procedure's query reading 2 items takes %d round trips to PostgreSQL, want at most 5", few)
	}
	if all > few+1 {
		t.Errorf("a procedure's query reading %d items takes %d round trips to PostgreSQL, %d reading 2: want at most one more", items, all, few)
	}
}

// TestSharedStoredProcedureFromTheCacheIsNeverStale: the procedure a
// gateway runs is the one its container has now, though the gateway's
// cache knew the container before it was deleted and made again elsewhere
// (the script's read carries the catalog check).
func TestSharedStoredProcedureFromTheCacheIsNeverStale(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		pk, _ := ParsePartitionKeyHeader(`["p"]`)
		create := func(version string) {
			t.Helper()
			body := fmt.Sprintf(`function () { getContext().getResponse().setBody(%q); }`, version)
			if _, err := a.CreateScript(ctx, "db", "c", StoredProcedures, fmt.Appendf(nil, `{"id":"s","body":%q}`, body)); err != nil {
				t.Fatal(err)
			}
		}
		execute := func(e *Engine) (string, error) {
			res, err := e.ExecuteStoredProcedure(ctx, &ExecuteRequest{Database: "db", Container: "c", ID: "s", PartitionKey: pk, HasPartitionKey: true})
			if err != nil {
				return "", err
			}
			return string(res.Body), nil
		}
		create("v1")
		for round := range 3 {
			if got, err := execute(b); err != nil || got != `"v1"` {
				t.Fatalf("round %d: B runs %s, %v; want A's v1", round, got, err)
			}
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := execute(b); statusOf(err) != 404 {
				t.Fatalf("round %d: B runs a procedure of a container deleted on A: %v, want 404", round, err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := execute(b); statusOf(err) != 404 {
				t.Fatalf("round %d: B runs a procedure the container made again on A does not have: %v, want 404", round, err)
			}
			create("v2")
			if got, err := execute(b); err != nil || got != `"v2"` {
				t.Fatalf("round %d: B runs %s, %v; want the v2 of the container made again", round, got, err)
			}
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
			create("v1")
		}
	})
}

// TestSharedBatchReadsItsItemsWithItsLocks: on PostgreSQL a transactional
// batch reads the items its operations name in the round trip that takes
// its locks and checks the catalog, and sends its writes with the COMMIT
// and the session token's watermark: two round trips however many
// operations it has, as a single write, the server's own steps (the
// container from the cache, the session token from the result) included.
func TestSharedBatchReadsItsItemsWithItsLocks(t *testing.T) {
	ctx := t.Context()
	e, proxy := tripsEngine(t)
	for _, id := range []string{"r", "x", "d"} {
		if _, err := e.CreateItem(ctx, req("", "p", fmt.Sprintf(`{"id":%q,"pk":"p","n":0}`, id))); err != nil {
			t.Fatal(err)
		}
	}
	round := 0
	batch := func(creates int) func() error {
		return func() error {
			round++
			ops := []string{
				`{"operationType":"Read","id":"r"}`,
				`{"operationType":"Upsert","resourceBody":{"id":"x","pk":"p","n":1}}`,
				`{"operationType":"Patch","id":"x","resourceBody":{"operations":[{"op":"incr","path":"/n","value":1}]}}`,
				fmt.Sprintf(`{"operationType":"Replace","id":"r","resourceBody":{"id":"r","pk":"p","round":%d}}`, round),
				`{"operationType":"Delete","id":"d"}`,
				`{"operationType":"Create","resourceBody":{"id":"d","pk":"p"}}`,
			}
			for i := range creates {
				ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"c%d-%d","pk":"p"}}`, round, i))
			}
			res, _, err := batchRequest(ctx, e, ops)
			if err != nil {
				return err
			}
			if res.Failed {
				return fmt.Errorf("the batch failed: %+v", res.Results)
			}
			if res.SessionLSN == 0 {
				return fmt.Errorf("no session LSN with the batch's result")
			}
			return nil
		}
	}
	few := fewestTrips(t, proxy, batch(0))
	many := fewestTrips(t, proxy, batch(60))
	t.Logf("a transactional batch: %d round trips with 6 operations, %d with 66", few, many)
	if few > 2 || many > 2 {
		t.Errorf("a transactional batch takes %d round trips to PostgreSQL with 6 operations, %d with 66; want 2", few, many)
	}
	// Each operation saw the ones before it, not what the batch read as
	// it began: the patch incremented the upsert's 1, the create followed
	// the delete.
	x, err := e.ReadItem(ctx, req("x", "p", ""))
	if err != nil || !strings.Contains(string(x.Body), `"n":2`) {
		t.Fatalf("x after the batches: %s, %v; want n 2", x.Body, err)
	}
	// A batch that fails writes nothing.
	res, _, err := batchRequest(ctx, e, []string{`{"operationType":"Create","resourceBody":{"id":"new","pk":"p"}}`, `{"operationType":"Create","resourceBody":{"id":"r","pk":"p"}}`})
	if err != nil || !res.Failed || res.Results[1].Status != 409 {
		t.Fatalf("a batch whose second create conflicts: %+v, %v; want it failed with 409", res, err)
	}
	if _, err := e.ReadItem(ctx, req("new", "p", "")); statusOf(err) != 404 {
		t.Fatalf("the failed batch's first create: %v, want 404", err)
	}
}

// TestSharedTriggerFromTheCacheIsNeverStale: the trigger a write on a
// gateway runs is the one its container has now, though the gateway's
// cache knew the container before it was deleted and made again elsewhere.
func TestSharedTriggerFromTheCacheIsNeverStale(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		create := func(version string) {
			t.Helper()
			body := fmt.Sprintf(`function () { var r = getContext().getRequest(), d = r.getBody(); d.v = %q; r.setBody(d); }`, version)
			if _, err := a.CreateScript(ctx, "db", "c", Triggers, fmt.Appendf(nil, `{"id":"tr","body":%q,"triggerType":"Pre","triggerOperation":"All"}`, body)); err != nil {
				t.Fatal(err)
			}
		}
		write := func() (string, error) {
			r := req("", "p", `{"id":"1","pk":"p"}`)
			r.PreTriggers = []string{"tr"}
			res, err := b.UpsertItem(ctx, r)
			if err != nil {
				return "", err
			}
			return string(res.Body), nil
		}
		recreate := func() {
			t.Helper()
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
				t.Fatal(err)
			}
		}
		create("v1")
		for round := range 3 {
			if got, err := write(); err != nil || !strings.Contains(got, `"v":"v1"`) {
				t.Fatalf("round %d: B's write ran %s, %v; want A's trigger v1", round, got, err)
			}
			recreate()
			if _, err := write(); statusOf(err) != 404 {
				t.Fatalf("round %d: B's write names a trigger the container made again on A does not have: %v, want 404", round, err)
			}
			create("v2")
			if got, err := write(); err != nil || !strings.Contains(got, `"v":"v2"`) {
				t.Fatalf("round %d: B's write ran %s, %v; want the v2 of the container made again", round, got, err)
			}
			recreate()
			create("v1")
		}
	})
}
