package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is a settable clock for engines under test.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newTestEngine opens an engine on memory storage with a test clock and no
// background sweeper, and creates database "db".
func newTestEngine(t testing.TB) (*Engine, *testClock) {
	ctx := t.Context()
	t.Helper()
	clock := newTestClock()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	return e, clock
}

func createContainer(t testing.TB, e *Engine, body string) {
	ctx := t.Context()
	t.Helper()
	if _, err := e.CreateContainer(ctx, "db", []byte(body), nil); err != nil {
		t.Fatalf("create container %s: %v", body, err)
	}
}

func upsert(t testing.TB, e *Engine, coll, body string) *ItemResult {
	ctx := t.Context()
	t.Helper()
	res, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: coll, Body: []byte(body)})
	if err != nil {
		t.Fatalf("upsert %s: %v", body, err)
	}
	return res
}

func deleteItem(t testing.TB, e *Engine, coll, id, pk string) {
	ctx := t.Context()
	t.Helper()
	if _, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: coll, ID: id, PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
}

// feedDoc is the part of a change feed document the tests look at.
type feedDoc struct {
	ID  string `json:"id"`
	PK  string `json:"pk"`
	V   int    `json:"v"`
	LSN uint64 `json:"_lsn"`
	TS  int64  `json:"_ts"`
}

// avadDoc is an all-versions-and-deletes record.
type avadDoc struct {
	Current  *feedDoc `json:"current"`
	Previous *feedDoc `json:"previous"`
	Metadata struct {
		OperationType     string            `json:"operationType"`
		LSN               uint64            `json:"lsn"`
		CRTS              int64             `json:"crts"`
		PreviousImageLSN  uint64            `json:"previousImageLSN"`
		ID                string            `json:"id"`
		PartitionKey      map[string]string `json:"partitionKey"`
		TimeToLiveExpired *bool             `json:"timeToLiveExpired"`
	} `json:"metadata"`
}

func decodeDocs[T any](t testing.TB, items [][]byte) []T {
	t.Helper()
	out := make([]T, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &out[i]); err != nil {
			t.Fatalf("change feed document %s: %v", it, err)
		}
	}
	return out
}

func ids(docs []feedDoc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.ID
	}
	return out
}

// readAll follows continuations from req until the feed answers 304, and
// returns every document and the final ETag.
func readAll(t testing.TB, e *Engine, req ChangeFeedRequest) ([][]byte, string) {
	ctx := t.Context()
	t.Helper()
	var docs [][]byte
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("the change feed never answered 304")
		}
		res, err := e.ReadChangeFeed(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		if res.ETag == "" {
			t.Fatal("change feed response without an ETag")
		}
		docs = append(docs, res.Items...)
		req.Continuation = res.ETag
		req.FromNow = false
		if res.NotModified {
			return docs, res.ETag
		}
	}
}

func TestChangeFeedStartPoints(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	upsert(t, e, "c", `{"id":"a","pk":"p"}`)
	upsert(t, e, "c", `{"id":"b","pk":"p"}`)
	first, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", FromNow: true})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(10 * time.Second)
	since := clock.now()
	upsert(t, e, "c", `{"id":"c","pk":"q"}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","v":2}`)

	tests := []struct {
		name string
		req  ChangeFeedRequest
		want []string
	}{
		{"beginning", ChangeFeedRequest{}, []string{"b", "c", "a"}},
		{"now", ChangeFeedRequest{FromNow: true}, nil},
		{"since", ChangeFeedRequest{Since: since}, []string{"c", "a"}},
		{"since after everything", ChangeFeedRequest{Since: since.Add(time.Hour)}, nil},
		{"continuation from before the last writes", ChangeFeedRequest{Continuation: first.ETag}, []string{"c", "a"}},
		{"continuation wins over now", ChangeFeedRequest{Continuation: first.ETag, FromNow: true}, []string{"c", "a"}},
		{"one partition key", ChangeFeedRequest{PartitionKey: StringKey("p"), HasPartitionKey: true}, []string{"b", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Database, req.Container = "db", "c"
			docs, _ := readAll(t, e, req)
			if got := ids(decodeDocs[feedDoc](t, docs)); fmt.Sprint(got) != fmt.Sprint(tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
		})
	}
	if !first.NotModified {
		t.Errorf("start from now answered %d items, want 304", len(first.Items))
	}
}

func TestChangeFeedLatestVersionAndLSN(t *testing.T) {
	skipOnPlaced(t, "the feed of a container on one place ends at that place's watermark, not the lowest of the places' the sequencer reports")
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","v":1}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","v":2}`)
	upsert(t, e, "c", `{"id":"b","pk":"p","v":1}`)
	deleteItem(t, e, "c", "b", "p")
	docs, etag := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c"})
	got := decodeDocs[feedDoc](t, docs)
	if len(got) != 1 || got[0].ID != "a" || got[0].V != 2 || got[0].LSN == 0 {
		t.Fatalf("feed = %s, want only a at v2 with _lsn", docs)
	}
	if want := FormatChangeFeedETag(watermarkNow(ctx, e.seq)); etag != want {
		t.Errorf("final etag %s, want %s", etag, want)
	}
	// A later change to an item already read reports it again.
	upsert(t, e, "c", `{"id":"a","pk":"p","v":3}`)
	docs, _ = readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Continuation: etag})
	if got := decodeDocs[feedDoc](t, docs); len(got) != 1 || got[0].V != 3 {
		t.Errorf("after another write the feed = %s, want a at v3", docs)
	}
}

func TestChangeFeedPagesEndBetweenTransactions(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}}`)
	c, _ := e.Container(ctx, "db", "c")
	upsert(t, e, "c", `{"id":"first","pk":"p"}`)
	// One transaction writes three items under one sequence number.
	err := e.seam.inPartition(ctx, c, StringKey("p"), nil, txnFunc(func(tx *txn) error {
		for _, id := range []string{"x", "y", "z"} {
			it, perr := c.parseItem([]byte(`{"id":"`+id+`","pk":"p"}`), &ItemRequest{})
			if perr != nil {
				return perr
			}
			if _, err := tx.put(ctx, it, nil); err != nil {
				return err
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	upsert(t, e, "c", `{"id":"last","pk":"p"}`)
	for _, mode := range []ChangeFeedMode{LatestVersion, AllVersionsAndDeletes} {
		var pages [][]int
		var all int
		req := &ChangeFeedRequest{Database: "db", Container: "c", Mode: mode, MaxItems: 2}
		for {
			res, err := e.ReadChangeFeed(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.NotModified {
				break
			}
			pages = append(pages, []int{len(res.Items)})
			all += len(res.Items)
			req.Continuation = res.ETag
		}
		if all != 5 || fmt.Sprint(pages) != "[[4] [1]]" {
			t.Errorf("mode %d: page sizes %v (%d items), want [[4] [1]]: the transaction's three records stay together", mode, pages, all)
		}
	}
}

func TestChangeFeedScopes(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	createContainer(t, e, `{"id":"h","partitionKey":{"paths":["/pk","/sub"],"kind":"MultiHash","version":2}}`)
	for i := range 20 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i%5))
		upsert(t, e, "h", fmt.Sprintf(`{"id":"i%d","pk":"p%d","sub":"s%d"}`, i, i%2, i%3))
	}
	c, _ := e.Container(ctx, "db", "c")
	epkOf := func(pk string) string { return EPKHex(effectivePartitionKey(&c.pk, StringKey(pk))) }
	p0 := epkOf("p0")
	h, _ := e.Container(ctx, "db", "h")
	hp1 := EPKHex(effectivePartitionKey(&h.pk, PartitionKey{StringKey("p1")[0]}))
	tests := []struct {
		name string
		req  ChangeFeedRequest
		want func(id string, pk string) bool
	}{
		{"whole container", ChangeFeedRequest{Container: "c"}, func(string, string) bool { return true }},
		{"one partition key", ChangeFeedRequest{Container: "c", PartitionKey: StringKey("p3"), HasPartitionKey: true},
			func(_ string, pk string) bool { return pk == "p3" }},
		{"the whole range", ChangeFeedRequest{Container: "c", MinEPK: "", MaxEPK: "FF"}, func(string, string) bool { return true }},
		{"below p0's EPK", ChangeFeedRequest{Container: "c", MaxEPK: p0},
			func(_ string, pk string) bool { return epkOf(pk) < p0 }},
		{"from p0's EPK up", ChangeFeedRequest{Container: "c", MinEPK: p0, MaxEPK: "FF"},
			func(_ string, pk string) bool { return epkOf(pk) >= p0 }},
		{"hierarchical prefix range", ChangeFeedRequest{Container: "h", MinEPK: hp1, MaxEPK: hp1 + "FF"},
			func(_ string, pk string) bool { return pk == "p1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Database = "db"
			docs, _ := readAll(t, e, req)
			got := decodeDocs[feedDoc](t, docs)
			want := 0
			for i := range 20 {
				pk := fmt.Sprintf("p%d", i%5)
				if tt.req.Container == "h" {
					pk = fmt.Sprintf("p%d", i%2)
				}
				if tt.want(fmt.Sprintf("i%d", i), pk) {
					want++
				}
			}
			for _, d := range got {
				if !tt.want(d.ID, d.PK) {
					t.Errorf("item %s (pk %s) is outside the scope", d.ID, d.PK)
				}
			}
			if len(got) != want {
				t.Errorf("%d items, want %d", len(got), want)
			}
		})
	}
}

func TestChangeFeedErrors(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	tests := []struct {
		name   string
		req    ChangeFeedRequest
		status int
	}{
		{"bad continuation", ChangeFeedRequest{Container: "c", Continuation: `"abc"`}, http.StatusBadRequest},
		{"bad start EPK", ChangeFeedRequest{Container: "c", MinEPK: "XYZ"}, http.StatusBadRequest},
		{"partition key of the wrong shape", ChangeFeedRequest{Container: "c", PartitionKey: PartitionKey{}, HasPartitionKey: true}, http.StatusBadRequest},
		{"no such container", ChangeFeedRequest{Container: "nope"}, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Database = "db"
			_, err := e.ReadChangeFeed(ctx, &req)
			if got := StatusOf(err); got != tt.status {
				t.Errorf("status %d (%v), want %d", got, err, tt.status)
			}
		})
	}
}

// TestChangeFeedWaitsForLateCommits holds a sequence number allocated but not
// finished, as a slow writer would, and checks that the feed does not move
// past it while later writes commit.
func TestChangeFeedWaitsForLateCommits(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	upsert(t, e, "c", `{"id":"a","pk":"p"}`)
	_, etag := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c"})
	held, release := holdLSN(t, e, "c", "held")
	upsert(t, e, "c", `{"id":"b","pk":"q"}`)
	res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", Continuation: etag})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NotModified || res.ETag != etag {
		t.Fatalf("with sequence number %d in flight the feed returned %d items and etag %s, want 304 at %s", held, len(res.Items), res.ETag, etag)
	}
	release()
	docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Continuation: etag})
	if got := ids(decodeDocs[feedDoc](t, docs)); fmt.Sprint(got) != "[b]" {
		t.Errorf("after the late commit finished the feed = %v, want [b]", got)
	}
}

func TestChangeFeedAllVersionsAndDeletes(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}}`)
	start, _ := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", Mode: AllVersionsAndDeletes, FromNow: true})
	created := upsert(t, e, "c", `{"id":"a","pk":"p","v":1}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","v":2}`)
	deleteItem(t, e, "c", "a", "p")
	upsert(t, e, "c", `{"id":"a","pk":"p","v":3}`)
	docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Mode: AllVersionsAndDeletes, Continuation: start.ETag})
	got := decodeDocs[avadDoc](t, docs)
	if len(got) != 4 {
		t.Fatalf("%d records, want 4: %s", len(got), docs)
	}
	wantOps := []string{"create", "replace", "delete", "create"}
	for i, r := range got {
		if r.Metadata.OperationType != wantOps[i] {
			t.Errorf("record %d: operationType %q, want %q", i, r.Metadata.OperationType, wantOps[i])
		}
		if i > 0 && r.Metadata.LSN <= got[i-1].Metadata.LSN {
			t.Errorf("record %d: lsn %d not after %d", i, r.Metadata.LSN, got[i-1].Metadata.LSN)
		}
		if r.Metadata.CRTS == 0 {
			t.Errorf("record %d has no crts", i)
		}
	}
	if got[0].Current == nil || got[0].Current.V != 1 || got[0].Metadata.PreviousImageLSN != 0 {
		t.Errorf("create record %s", docs[0])
	}
	if got[1].Current == nil || got[1].Current.V != 2 || got[1].Metadata.PreviousImageLSN != got[0].Metadata.LSN {
		t.Errorf("replace record %s: want v2 and previousImageLSN %d", docs[1], got[0].Metadata.LSN)
	}
	del := got[2]
	if del.Previous == nil || del.Previous.V != 2 || del.Metadata.ID != "a" || del.Metadata.PartitionKey["pk"] != "p" ||
		del.Metadata.TimeToLiveExpired == nil || *del.Metadata.TimeToLiveExpired || del.Metadata.PreviousImageLSN != got[1].Metadata.LSN {
		t.Errorf("delete record %s", docs[2])
	}
	if got[3].Current == nil || got[3].Current.V != 3 {
		t.Errorf("re-create record %s", docs[3])
	}
	if created.ETag == "" {
		t.Error("create returned no etag")
	}
}

func TestChangeFeedReadsConsistentUnderPaging(t *testing.T) {
	// Reading with every page size yields the same records in the same order.
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	for i := range 50 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d","v":%d}`, i%30, i%30%7, i))
	}
	var want []string
	for _, size := range []int{1, 3, 7, 100} {
		docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", MaxItems: size})
		got := ids(decodeDocs[feedDoc](t, docs))
		if want == nil {
			want = got
			if len(got) != 30 {
				t.Fatalf("%d items, want 30", len(got))
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("page size %d: %v, want %v", size, got, want)
		}
	}
}

// TestChangeFeedBoundsWorkPerRequest checks that a request which finds
// nothing in a long stretch of records stops early with a 200, an empty page
// and a continuation past what it read, instead of reading everything.
func TestChangeFeedBoundsWorkPerRequest(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	n := maxChangeFeedExamine + maxChangeFeedExamine/5
	for i := range n {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i%10))
	}
	clock.advance(time.Minute)
	upsert(t, e, "c", `{"id":"late","pk":"p0"}`)
	req := &ChangeFeedRequest{Database: "db", Container: "c", Since: clock.now()}
	var pages []string
	for len(pages) < 10 {
		res, err := e.ReadChangeFeed(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.NotModified {
			pages = append(pages, "304")
			break
		}
		pages = append(pages, fmt.Sprint(ids(decodeDocs[feedDoc](t, res.Items))))
		req.Continuation = res.ETag
	}
	if fmt.Sprint(pages) != "[[] [late] 304]" {
		t.Errorf("pages %v, want an empty page when the first %d reads found nothing, then [late], then 304", pages, maxChangeFeedExamine)
	}
}
