package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// rangeDoc is a partition key range as GET …/pkranges returns it.
type rangeDoc struct {
	ID           string   `json:"id"`
	RID          string   `json:"_rid"`
	MinInclusive string   `json:"minInclusive"`
	MaxExclusive string   `json:"maxExclusive"`
	Parents      []string `json:"parents"`
	Status       string   `json:"status"`
}

// rawResponse is a response to a request sent without an SDK.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// rawRequest sends a request signed with the master key for resource type
// rtype and link, with extra headers.
func rawRequest(t *testing.T, s *orrerytest.Server, method, path, rtype, link string, body []byte, headers map[string]string) rawResponse {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, method, rtype, link, date)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return rawResponse{resp.StatusCode, resp.Header, out}
}

// readRanges reads a container's partition key ranges with a plain GET.
func readRanges(t *testing.T, s *orrerytest.Server, db, coll string) []rangeDoc {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll
	r := rawRequest(t, s, "GET", link+"/pkranges", "pkranges", link, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET pkranges: %d %s", r.status, r.body)
	}
	var feed struct {
		PartitionKeyRanges []rangeDoc
		Count              int `json:"_count"`
	}
	if err := json.Unmarshal(r.body, &feed); err != nil {
		t.Fatal(err)
	}
	if feed.Count != len(feed.PartitionKeyRanges) {
		t.Errorf("pkranges _count %d for %d ranges", feed.Count, len(feed.PartitionKeyRanges))
	}
	return feed.PartitionKeyRanges
}

// checkCover fails unless the feed ranges cover "" to "FF" in order, without
// gaps or overlaps.
func checkCover(t *testing.T, ranges []azcosmos.FeedRange) {
	t.Helper()
	at := ""
	for _, r := range ranges {
		if r.MinInclusive != at || r.MaxExclusive <= r.MinInclusive && r.MaxExclusive != "FF" {
			t.Fatalf("feed ranges %+v do not tile the key space (at %q)", ranges, at)
		}
		at = r.MaxExclusive
	}
	if at != "FF" {
		t.Fatalf("feed ranges %+v end at %q, not FF", ranges, at)
	}
}

// newRangedContainer creates db/coll partitioned on /pk with the given
// throughput options.
func newRangedContainer(t *testing.T, s *orrerytest.Server, db, coll string, o *azcosmos.CreateContainerOptions) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && statusOf(t, err) != http.StatusConflict {
		t.Fatalf("create database: %v", err)
	}
	d, _ := s.Client.NewDatabase(db)
	props := azcosmos.ContainerProperties{ID: coll, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}, Version: 2}}
	if _, err := d.CreateContainer(ctx, props, o); err != nil {
		t.Fatalf("create container: %v", err)
	}
	c, _ := d.NewContainer(coll)
	return c
}

func TestGoSDKFeedRangesFollowThroughput(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	manual := func(ru int32) *azcosmos.CreateContainerOptions {
		tp := azcosmos.NewManualThroughputProperties(ru)
		return &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
	}
	auto := azcosmos.NewAutoscaleThroughputProperties(20000)
	tests := []struct {
		coll string
		opts *azcosmos.CreateContainerOptions
		want int
	}{
		{"none", nil, 1},
		{"m400", manual(400), 1},
		{"m10000", manual(10000), 1},
		{"m10100", manual(10100), 2}, // the service takes multiples of 100
		{"m21000", manual(21000), 4}, // ⌈RU/s ÷ 6,000⌉ above 10,000
		{"m40000", manual(40000), 7},
		{"auto20000", &azcosmos.CreateContainerOptions{ThroughputProperties: &auto}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.coll, func(t *testing.T) {
			c := newRangedContainer(t, s, "db", tt.coll, tt.opts)
			ranges, err := c.ReadFeedRanges(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ranges) != tt.want {
				t.Fatalf("ReadFeedRanges: %d ranges %+v, want %d", len(ranges), ranges, tt.want)
			}
			checkCover(t, ranges)
			docs := readRanges(t, s, "db", tt.coll)
			ids := map[string]bool{}
			for _, d := range docs {
				if d.ID == "" || d.RID == "" || d.Status != "online" || len(d.Parents) != 0 || ids[d.RID] {
					t.Errorf("range %+v: want an id, a unique _rid, status online and no parents", d)
				}
				ids[d.RID] = true
			}
		})
	}

	// The server option gives every new container that many ranges at least.
	s3 := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{PartitionKeyRanges: 3}})
	c := newRangedContainer(t, s3, "db", "c", nil)
	ranges, err := c.ReadFeedRanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 3 {
		t.Fatalf("with PartitionKeyRanges 3: %d ranges", len(ranges))
	}
	checkCover(t, ranges)
	if c4 := newRangedContainer(t, s3, "db", "big", manual(24000)); true {
		if r, _ := c4.ReadFeedRanges(ctx, nil); len(r) != 4 {
			t.Fatalf("24,000 RU/s with PartitionKeyRanges 3: %d ranges, want 4", len(r))
		}
	}
}

// epkIn reports whether partition key value pk hashes into [min, max).
func epkIn(pk, min, max string) bool {
	def := engine.PartitionKeyDefinition{Paths: []string{"/pk"}, Kind: "Hash", Version: 2}
	epk := engine.EPKHex(engine.EffectivePartitionKey(&def, engine.StringKey(pk)))
	return epk >= min && (max == "FF" || epk < max)
}

// readAllChangeFeed drains a change feed from its start and returns the items.
func readAllChangeFeed(t *testing.T, c *azcosmos.ContainerClient, fr azcosmos.FeedRange) []changedItem {
	t.Helper()
	items, _, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{FeedRange: &fr, MaxItemCount: 7})
	return items
}

func TestGoSDKChangeFeedPerFeedRange(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	tp := azcosmos.NewManualThroughputProperties(24000)
	c := newRangedContainer(t, s, "db", "feed", &azcosmos.CreateContainerOptions{ThroughputProperties: &tp})
	const keys, perKey = 64, 3
	for i := range keys * perKey {
		pk := fmt.Sprintf("k%02d", i%keys)
		upsertJSON(t, c, pk, changedItem{ID: fmt.Sprintf("i%03d", i), PK: pk, V: 1})
	}
	ranges, err := c.ReadFeedRanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 4 {
		t.Fatalf("%d feed ranges, want 4", len(ranges))
	}
	seen := map[string]int{}
	for _, fr := range ranges {
		items := readAllChangeFeed(t, c, fr)
		if len(items) == 0 {
			t.Errorf("range %+v has no changes: the keys should spread over every range", fr)
		}
		for _, it := range items {
			seen[it.ID]++
			if !epkIn(it.PK, fr.MinInclusive, fr.MaxExclusive) {
				t.Errorf("item %s (pk %s) came from range %+v, which does not hold its key", it.ID, it.PK, fr)
			}
		}
	}
	if len(seen) != keys*perKey {
		t.Errorf("the ranges' change feeds gave %d distinct items, want %d", len(seen), keys*perKey)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s came %d times across the ranges", id, n)
		}
	}
	// One feed range over the whole container spans the four ranges.
	whole := readAllChangeFeed(t, c, azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"})
	if len(whole) != keys*perKey {
		t.Errorf("the whole container's change feed gave %d items, want %d", len(whole), keys*perKey)
	}
}

// queryRange runs a query scoped to one partition key range without an SDK,
// as the JavaScript SDK's query pipeline sends it, following continuations.
func queryRange(t *testing.T, s *orrerytest.Server, db, coll, rangeID, q string) ([]map[string]any, rawResponse) {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll
	body := mustJSON(t, map[string]any{"query": q})
	var out []map[string]any
	cont := ""
	for range 1000 {
		h := map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "x-ms-documentdb-isquery": "true",
			"Content-Type": "application/query+json", "x-ms-max-item-count": "10"}
		if cont != "" {
			h["x-ms-continuation"] = cont
		}
		r := rawRequest(t, s, "POST", link+"/docs", "docs", link, body, h)
		if r.status != http.StatusOK {
			return out, r
		}
		var page struct{ Documents []map[string]any }
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Documents...)
		if cont = r.header.Get("x-ms-continuation"); cont == "" {
			return out, r
		}
	}
	t.Fatal("the query never ended")
	return nil, rawResponse{}
}

func TestQueryPerPartitionKeyRange(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{PartitionKeyRanges: 4}})
	ctx := context.Background()
	c := newRangedContainer(t, s, "db", "q", nil)
	const n = 120
	for i := range n {
		pk := fmt.Sprintf("p%d", i%40)
		upsertJSON(t, c, pk, map[string]any{"id": fmt.Sprintf("d%03d", i), "pk": pk, "n": i})
	}
	ranges := readRanges(t, s, "db", "q")
	if len(ranges) != 4 {
		t.Fatalf("%d ranges, want 4", len(ranges))
	}
	for _, q := range []string{"SELECT * FROM c", "SELECT * FROM c WHERE c.n >= 0", "SELECT * FROM c ORDER BY c.n"} {
		seen := map[string]bool{}
		for _, r := range ranges {
			docs, last := queryRange(t, s, "db", "q", r.ID, q)
			if last.status != http.StatusOK {
				t.Fatalf("%s on range %s: %d %s", q, r.ID, last.status, last.body)
			}
			for _, d := range docs {
				id, pk := d["id"].(string), d["pk"].(string)
				if seen[id] {
					t.Errorf("%s: %s returned by two ranges", q, id)
				}
				seen[id] = true
				if !epkIn(pk, r.MinInclusive, r.MaxExclusive) {
					t.Errorf("%s: range %s returned %s (pk %s) outside it", q, r.ID, id, pk)
				}
			}
		}
		if len(seen) != n {
			t.Errorf("%s: the ranges returned %d items together, want %d", q, len(seen), n)
		}
	}
	// ReadManyItems groups the identities by range and queries each range.
	var ids []azcosmos.ItemIdentity
	for i := 0; i < n; i += 3 {
		ids = append(ids, azcosmos.ItemIdentity{ID: fmt.Sprintf("d%03d", i), PartitionKey: azcosmos.NewPartitionKeyString(fmt.Sprintf("p%d", i%40))})
	}
	many, err := c.ReadManyItems(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(many.Items) != len(ids) {
		t.Errorf("ReadManyItems over four ranges: %d items, want %d", len(many.Items), len(ids))
	}
	// The read feed of a range is its items too.
	fed := 0
	for _, r := range ranges {
		link := "dbs/db/colls/q"
		res := rawRequest(t, s, "GET", link+"/docs", "docs", link, nil, map[string]string{"x-ms-documentdb-partitionkeyrangeid": r.ID})
		var page struct{ Documents []map[string]any }
		if res.status != http.StatusOK || json.Unmarshal(res.body, &page) != nil {
			t.Fatalf("read feed of range %s: %d %s", r.ID, res.status, res.body)
		}
		for _, d := range page.Documents {
			if !epkIn(d["pk"].(string), r.MinInclusive, r.MaxExclusive) {
				t.Errorf("read feed of range %s gave %v", r.ID, d["id"])
			}
		}
		fed += len(page.Documents)
	}
	if fed != n {
		t.Errorf("the ranges' read feeds gave %d items together, want %d", fed, n)
	}
	// A split range answers 410/1002; its children answer for its items.
	if _, err := s.SplitPartitionKeyRange(ctx, "db", "q", ranges[0].ID); err != nil {
		t.Fatal(err)
	}
	_, gone := queryRange(t, s, "db", "q", ranges[0].ID, "SELECT * FROM c")
	if gone.status != http.StatusGone || gone.header.Get("x-ms-substatus") != "1002" {
		t.Fatalf("query on the split range: %d substatus %q %s, want 410/1002", gone.status, gone.header.Get("x-ms-substatus"), gone.body)
	}
	total := 0
	for _, r := range readRanges(t, s, "db", "q") {
		docs, last := queryRange(t, s, "db", "q", r.ID, "SELECT * FROM c")
		if last.status != http.StatusOK {
			t.Fatalf("range %s after the split: %d %s", r.ID, last.status, last.body)
		}
		total += len(docs)
	}
	if total != n {
		t.Errorf("after the split the ranges return %d items together, want %d", total, n)
	}
}

func TestSplitAdminCall(t *testing.T) {
	s := orrerytest.Start(t)
	newRangedContainer(t, s, "db", "c", nil)
	link := "dbs/db/colls/c/pkranges/0"
	split := func(key string, rtype, signedLink string) rawResponse {
		date := time.Now().UTC().Format(http.TimeFormat)
		auth, err := server.Sign(key, "POST", rtype, signedLink, date)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", s.Endpoint+"_admin/"+link+"/split", nil)
		req.Header.Set("Authorization", auth)
		req.Header.Set("x-ms-date", date)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return rawResponse{resp.StatusCode, resp.Header, b}
	}
	otherKey := "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
	if r := split(otherKey, "pkranges", link); r.status != http.StatusUnauthorized {
		t.Errorf("split signed with another key: %d, want 401", r.status)
	}
	if r := split(s.Key, "docs", link); r.status != http.StatusUnauthorized {
		t.Errorf("split signed for another resource: %d, want 401", r.status)
	}
	r := split(s.Key, "pkranges", link)
	if r.status != http.StatusOK {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	var feed struct{ PartitionKeyRanges []rangeDoc }
	if err := json.Unmarshal(r.body, &feed); err != nil {
		t.Fatal(err)
	}
	ch := feed.PartitionKeyRanges
	if len(ch) != 2 || ch[0].MinInclusive != "" || ch[0].MaxExclusive != ch[1].MinInclusive || ch[1].MaxExclusive != "FF" ||
		fmt.Sprint(ch[0].Parents) != "[0]" || fmt.Sprint(ch[1].Parents) != "[0]" {
		t.Fatalf("split answered %s", r.body)
	}
	if again := split(s.Key, "pkranges", link); again.status != http.StatusGone || again.header.Get("x-ms-substatus") != "1002" {
		t.Errorf("splitting the split range again: %d %q, want 410/1002", again.status, again.header.Get("x-ms-substatus"))
	}
	now := readRanges(t, s, "db", "c")
	if len(now) != 2 || now[0].ID != ch[0].ID || now[1].ID != ch[1].ID {
		t.Errorf("pkranges after the split: %+v", now)
	}
	// The incremental feed a routing cache reads: from the version before
	// the split, the children only; from the current version, 304.
	incremental := func(etag string) rawResponse {
		return rawRequest(t, s, "GET", "dbs/db/colls/c/pkranges", "pkranges", "dbs/db/colls/c", nil,
			map[string]string{"A-IM": "Incremental Feed", "x-ms-max-item-count": "-1", "If-None-Match": etag})
	}
	if r := incremental(`"1"`); r.status != http.StatusOK || strings.Count(string(r.body), `"minInclusive"`) != 2 ||
		!strings.Contains(string(r.body), `"parents":["0"]`) || r.header.Get("etag") != `"2"` {
		t.Errorf("incremental pkranges since version 1: %d etag %s %s", r.status, r.header.Get("etag"), r.body)
	}
	if r := incremental(`"2"`); r.status != http.StatusNotModified || r.header.Get("etag") != `"2"` {
		t.Errorf("incremental pkranges at the current version: %d etag %s", r.status, r.header.Get("etag"))
	}
	// A grandchild lists both ancestors.
	ids, err := s.SplitPartitionKeyRange(context.Background(), "db", "c", ch[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range readRanges(t, s, "db", "c") {
		if d.ID == ids[0] && fmt.Sprint(d.Parents) != fmt.Sprintf("[0 %s]", ch[1].ID) {
			t.Errorf("grandchild %s has parents %v", d.ID, d.Parents)
		}
	}
}

// splitWriter upserts versions of keys until stopped, writers goroutines at
// once, each writing its own keys in order; the last version of each key is
// in final once run has returned.
type splitWriter struct {
	writes atomic.Int64
	mu     sync.Mutex
	final  map[string]int
}

func (w *splitWriter) run(ctx context.Context, t *testing.T, c *azcosmos.ContainerClient, keys, writers int) {
	w.final = map[string]int{}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[string]int{}
			w.write(ctx, t, c, keys, writers, g, mine)
			w.mu.Lock()
			defer w.mu.Unlock()
			for k, v := range mine {
				w.final[k] = v
			}
		}()
	}
	wg.Wait()
}

// write is one writer: keys g, g+writers, g+2*writers, … in turn.
func (w *splitWriter) write(ctx context.Context, t *testing.T, c *azcosmos.ContainerClient, keys, writers, g int, final map[string]int) {
	for i := g; ctx.Err() == nil; i = (i + writers) % keys {
		pk := fmt.Sprintf("k%03d", i)
		v := final[pk] + 1
		_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), mustJSON(t, changedItem{ID: pk, PK: pk, V: v}), nil)
		if err != nil {
			t.Errorf("upsert during splits: %v", err)
			return
		}
		final[pk] = v
		w.writes.Add(1)
	}
}

// feedReader follows a change feed with the Go SDK's composite continuation
// and records the versions it sees per key.
type feedReader struct {
	mu       sync.Mutex
	versions map[string][]int
	token    string
}

func (r *feedReader) step(ctx context.Context, c *azcosmos.ContainerClient, fr *azcosmos.FeedRange) (int, error) {
	opts := azcosmos.ChangeFeedOptions{MaxItemCount: 25}
	if r.token != "" {
		opts.Continuation = &r.token
	} else {
		opts.FeedRange = fr
	}
	resp, err := c.ReadChangeFeed(ctx, &opts)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.versions == nil {
		r.versions = map[string][]int{}
	}
	for _, raw := range resp.Items {
		var it changedItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return 0, err
		}
		r.versions[it.ID] = append(r.versions[it.ID], it.V)
	}
	if resp.ContinuationToken != "" {
		r.token = resp.ContinuationToken
	}
	return len(resp.Items), nil
}

// caughtUp reports whether the reader has seen the final version of every key.
func (r *feedReader) caughtUp(final map[string]int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range final {
		vs := r.versions[k]
		if len(vs) == 0 || vs[len(vs)-1] != v {
			return false
		}
	}
	return true
}

func TestGoSDKChangeFeedAcrossSplitUnderLoad(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{PartitionKeyRanges: 2}})
	ctx := context.Background()
	c := newRangedContainer(t, s, "db", "split", nil)
	const keys = 40
	for i := range keys {
		pk := fmt.Sprintf("k%03d", i)
		upsertJSON(t, c, pk, changedItem{ID: pk, PK: pk, V: 0})
	}

	// A raw reader of range 0 keeps its continuation (an LSN etag).
	link := "dbs/db/colls/split"
	feedHeaders := func(rangeID, etag string) map[string]string {
		h := map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": rangeID, "x-ms-max-item-count": "1000"}
		if etag != "" {
			h["If-None-Match"] = etag
		}
		return h
	}
	first := rawRequest(t, s, "GET", link+"/docs", "docs", link, nil, feedHeaders("0", ""))
	if first.status != http.StatusOK || first.header.Get("etag") == "" {
		t.Fatalf("range 0's change feed: %d %s", first.status, first.body)
	}
	parentETag := first.header.Get("etag")

	// Readers: one over the whole container, one per initial feed range.
	ranges, err := c.ReadFeedRanges(ctx, nil)
	if err != nil || len(ranges) != 2 {
		t.Fatalf("feed ranges %+v, %v", ranges, err)
	}
	whole := azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"}
	readers := []*feedReader{{}, {}, {}}
	scopes := []*azcosmos.FeedRange{&whole, &ranges[0], &ranges[1]}

	wctx, stopWriter := context.WithCancel(ctx)
	w := &splitWriter{}
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); w.run(wctx, t, c, keys, 4) }()
	rctx, stopReaders := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	readErrs := make(chan error, len(readers))
	for i, r := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for rctx.Err() == nil {
				n, err := r.step(rctx, c, scopes[i])
				if err != nil {
					if rctx.Err() == nil {
						readErrs <- fmt.Errorf("reader %d: %w", i, err)
					}
					return
				}
				if n == 0 {
					time.Sleep(5 * time.Millisecond) // poll interval of an idle feed
				}
			}
		}()
	}
	waitWrites := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for w.writes.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the writer made only %d writes in 60 s", w.writes.Load())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	// Split range 0 while writes go on, then one of its children.
	waitWrites(100)
	children, err := s.SplitPartitionKeyRange(ctx, "db", "split", "0")
	if err != nil {
		t.Fatal(err)
	}
	waitWrites(250)
	if _, err := s.SplitPartitionKeyRange(ctx, "db", "split", children[1]); err != nil {
		t.Fatal(err)
	}
	waitWrites(500)
	stopWriter()
	<-writerDone

	// The raw reader of range 0 is told it is gone, finds the children by
	// their parents and continues on them from its own continuation.
	gone := rawRequest(t, s, "GET", link+"/docs", "docs", link, nil, feedHeaders("0", parentETag))
	if gone.status != http.StatusGone || gone.header.Get("x-ms-substatus") != "1002" {
		t.Fatalf("range 0 after its split: %d substatus %q, want 410/1002", gone.status, gone.header.Get("x-ms-substatus"))
	}
	var heirs []rangeDoc
	for _, d := range readRanges(t, s, "db", "split") {
		if len(d.Parents) > 0 && d.Parents[0] == "0" {
			heirs = append(heirs, d)
		}
	}
	if len(heirs) != 3 {
		t.Fatalf("descendants of range 0: %+v, want 3 (one child and two grandchildren)", heirs)
	}
	rawSeen := map[string]int{}
	for _, h := range heirs {
		etag := parentETag
		for {
			r := rawRequest(t, s, "GET", link+"/docs", "docs", link, nil, feedHeaders(h.ID, etag))
			if r.status == http.StatusNotModified {
				break
			}
			if r.status != http.StatusOK {
				t.Fatalf("range %s from range 0's continuation: %d %s", h.ID, r.status, r.body)
			}
			var page struct{ Documents []changedItem }
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Documents {
				rawSeen[it.ID]++
				if !epkIn(it.PK, h.MinInclusive, h.MaxExclusive) {
					t.Errorf("range %s gave %s, outside it", h.ID, it.ID)
				}
			}
			etag = r.header.Get("etag")
		}
	}
	inParent := 0
	for k := range w.final {
		if epkIn(k, ranges[0].MinInclusive, ranges[0].MaxExclusive) {
			inParent++
			if rawSeen[k] != 1 {
				t.Errorf("key %s of range 0 came %d times from its descendants, want once (its latest version)", k, rawSeen[k])
			}
		} else if rawSeen[k] != 0 {
			t.Errorf("key %s of range 1 came from range 0's descendants", k)
		}
	}
	if inParent == 0 {
		t.Fatal("no key fell in range 0")
	}

	// The SDK readers catch up with every key's last version, seeing each
	// key's versions in the order they were written.
	deadline := time.Now().Add(90 * time.Second)
	for {
		done := true
		for _, r := range readers[:1] {
			done = done && r.caughtUp(w.final)
		}
		sub := map[string]int{}
		for _, r := range readers[1:] {
			r.mu.Lock()
			for k, vs := range r.versions {
				if len(vs) > 0 {
					sub[k] = vs[len(vs)-1]
				}
			}
			r.mu.Unlock()
		}
		for k, v := range w.final {
			done = done && sub[k] == v
		}
		if done {
			break
		}
		select {
		case err := <-readErrs:
			t.Fatal(err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the change feed readers did not see every key's last version within 90 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopReaders()
	rwg.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Error(err)
	}
	for i, r := range readers {
		for k, vs := range r.versions {
			if !sort.IntsAreSorted(vs) {
				t.Errorf("reader %d saw key %s's versions out of order: %v", i, k, vs)
			}
			for j := 1; j < len(vs); j++ {
				if vs[j] == vs[j-1] {
					t.Errorf("reader %d saw version %d of %s twice", i, vs[j], k)
				}
			}
		}
	}
	// The per-range readers' tokens now name the children.
	for _, r := range readers[1:] {
		if !strings.Contains(r.token, "continuationToken") {
			t.Errorf("reader token %s", r.token)
		}
	}
	t.Logf("%d writes during two splits", w.writes.Load())
}

func TestPartitionKeyRangesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	var before []rangeDoc
	t.Run("split", func(t *testing.T) {
		s := orrerytest.StartWith(t, orrerytest.Options{Dir: dir})
		tp := azcosmos.NewManualThroughputProperties(18000)
		newRangedContainer(t, s, "db", "c", &azcosmos.CreateContainerOptions{ThroughputProperties: &tp})
		if _, err := s.SplitPartitionKeyRange(context.Background(), "db", "c", "1"); err != nil {
			t.Fatal(err)
		}
		before = readRanges(t, s, "db", "c")
	})
	s := orrerytest.StartWith(t, orrerytest.Options{Dir: dir})
	after := readRanges(t, s, "db", "c")
	if len(before) != 4 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("ranges before the restart %+v, after %+v", before, after)
	}
}
