package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// visibility reports where an item can be seen: point read, query, read feed
// and latest-version change feed.
func visibility(t *testing.T, e *Engine, coll, id, pk string) [4]bool {
	ctx := t.Context()
	t.Helper()
	var v [4]bool
	_, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: coll, ID: id, PartitionKey: StringKey(pk), HasPartitionKey: true})
	switch {
	case err == nil:
		v[0] = true
	case StatusOf(err) != 404:
		t.Fatalf("read: %v", err)
	}
	q, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: coll, Query: "SELECT VALUE c.id FROM c WHERE c.id = '" + id + "'"})
	if err != nil {
		t.Fatal(err)
	}
	v[1] = len(q.Items) == 1
	f, err := e.ReadFeed(ctx, &FeedRequest{Database: "db", Container: coll})
	if err != nil {
		t.Fatal(err)
	}
	v[2] = len(f.Items) == 1
	docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll})
	v[3] = len(docs) == 1
	return v
}

func TestTTLExpiryIsImmediateAndSwept(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name       string
		defaultTTL string // container defaultTtl JSON, "" for none
		itemTTL    string // item ttl JSON, "" for none
		expiresAt  int    // seconds after the write, 0 = never
	}{
		{"ttl off ignores the item's ttl", "", "1", 0},
		{"on without default: items live", "-1", "", 0},
		{"on without default: item ttl 1 s", "-1", "1", 1},
		{"default 1 s", "1", "", 1},
		{"default 1 s, item never expires", "1", "-1", 0},
		{"default 1 s, item ttl 5 s", "1", "5", 5},
		{"default 10 s, item ttl 1 s", "10", "1", 1},
	}
	e, clock := newTestEngine(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			coll := fmt.Sprintf("c%d", i)
			body := `{"id":"` + coll + `","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}`
			if tt.defaultTTL != "" {
				body += `,"defaultTtl":` + tt.defaultTTL
			}
			createContainer(t, e, body+"}")
			item := `{"id":"a","pk":"p"`
			if tt.itemTTL != "" {
				item += `,"ttl":` + tt.itemTTL
			}
			upsert(t, e, coll, item+"}")
			written := clock.now().Unix()
			all := [4]bool{true, true, true, true}
			if got := visibility(t, e, coll, "a", "p"); got != all {
				t.Fatalf("right after the write: visible in read/query/feed/change feed = %v", got)
			}
			c, _ := e.Container(ctx, "db", coll)
			for _, s := range []int{1, 2, 5, 3600} {
				clock.advance(time.Duration(written+int64(s)-clock.now().Unix()) * time.Second)
				wantVisible := tt.expiresAt == 0 || s < tt.expiresAt
				want := [4]bool{wantVisible, wantVisible, wantVisible, wantVisible}
				if got := visibility(t, e, coll, "a", "p"); got != want {
					t.Errorf("%d s after the write: visible in read/query/feed/change feed = %v, want %v", s, got, want)
				}
			}
			n, err := e.sweeper.sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantSwept := 0
			if tt.expiresAt != 0 {
				wantSwept = 1
			}
			if n != wantSwept {
				t.Errorf("the sweep deleted %d items, want %d", n, wantSwept)
			}
			p, _ := c.partition(StringKey("p"))
			_, gerr := e.store.Get(ctx, p.itemKey("a"))
			if stored := !errors.Is(gerr, storage.ErrNotFound); stored != (wantSwept == 0) {
				t.Errorf("after the sweep the item is stored = %v", stored)
			}
			docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes})
			recs := decodeDocs[avadDoc](t, docs)
			if len(recs) != 1+wantSwept {
				t.Fatalf("all versions and deletes: %s", docs)
			}
			if wantSwept == 1 {
				d := recs[1]
				if d.Metadata.OperationType != "delete" || d.Metadata.TimeToLiveExpired == nil || !*d.Metadata.TimeToLiveExpired || d.Metadata.ID != "a" {
					t.Errorf("the sweep's delete record = %s", docs[1])
				}
			}
		})
	}
}

func TestTTLRewriteOfExpiredItemLogsDeleteThenCreate(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":1,"changeFeedPolicy":{"retentionDuration":60}}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","v":1}`)
	clock.advance(2 * time.Second)
	res := upsert(t, e, "c", `{"id":"a","pk":"p","v":2}`)
	if res.Status != 201 {
		t.Errorf("upsert over an expired item: status %d, want 201", res.Status)
	}
	docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Mode: AllVersionsAndDeletes})
	recs := decodeDocs[avadDoc](t, docs)
	var ops []string
	for _, r := range recs {
		ops = append(ops, r.Metadata.OperationType)
	}
	if fmt.Sprint(ops) != "[create delete create]" || !*recs[1].Metadata.TimeToLiveExpired {
		t.Errorf("records %s, want create, delete by TTL, create", docs)
	}
	if n, _ := e.sweeper.sweep(ctx); n != 0 {
		t.Errorf("the sweep deleted %d items, want 0: the item was rewritten", n)
	}
}

func TestTTLChangingDefaultAppliesToExistingItems(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	for i := range 10 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i%3))
	}
	clock.advance(time.Minute)
	if n, _ := e.sweeper.sweep(ctx); n != 0 {
		t.Fatalf("TTL off: swept %d", n)
	}
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":30}`), ""); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.sweeper.sweep(ctx); n != 10 {
		t.Errorf("after turning on a 30 s default a minute later, swept %d, want 10", n)
	}
}

func TestSweeperRunsInBackgroundAndStopsOnClose(t *testing.T) {
	ctx := t.Context()
	clock := newTestClock()
	e, err := Open(ctx, newTestStore(t), Options{Now: clock.now, SweepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":5}`)
	for i := range 100 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i%7))
	}
	clock.advance(10 * time.Second)
	c, _ := e.Container(ctx, "db", "c")
	deadline := time.Now().Add(5 * time.Second)
	for {
		it, _ := e.store.NewIterator(ctx, keys.ItemContainerPrefix(c.rid), storage.PrefixEnd(keys.ItemContainerPrefix(c.rid)), false)
		left := 0
		for it.Next() {
			left++
		}
		it.Close()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d expired items still stored after 5 s of sweeping", left)
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the sweeper")
	}
}

func TestChangeLogRetention(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name      string
		policy    string
		retention time.Duration
	}{
		{"five minutes", `,"changeFeedPolicy":{"retentionDuration":5}`, 5 * time.Minute},
		{"a day", `,"changeFeedPolicy":{"retentionDuration":1440}`, 24 * time.Hour},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, clock := newTestEngine(t)
			coll := fmt.Sprintf("c%d", i)
			createContainer(t, e, `{"id":"`+coll+`","partitionKey":{"paths":["/pk"]}`+tt.policy+`}`)
			for i := range 1500 {
				upsert(t, e, coll, fmt.Sprintf(`{"id":"old%d","pk":"p%d"}`, i, i%4))
			}
			_, oldToken := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes})
			firstToken := FormatChangeFeedETag(1)
			clock.advance(tt.retention - time.Second)
			upsert(t, e, coll, `{"id":"new","pk":"p0"}`)
			if _, err := e.sweeper.sweep(ctx); err != nil {
				t.Fatal(err)
			}
			docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes})
			if len(docs) != 1501 {
				t.Fatalf("within the retention: %d records, want 1501", len(docs))
			}
			clock.advance(2 * time.Second)
			if _, err := e.sweeper.sweep(ctx); err != nil {
				t.Fatal(err)
			}
			docs, _ = readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes})
			if recs := decodeDocs[avadDoc](t, docs); len(recs) != 1 || recs[0].Current.ID != "new" {
				t.Errorf("past the retention, from the beginning: %s, want only the new record", docs)
			}
			if docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes, Continuation: oldToken}); len(docs) != 1 {
				t.Errorf("from a continuation after the pruned records: %d records, want 1", len(docs))
			}
			_, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: coll, Mode: AllVersionsAndDeletes, Continuation: firstToken})
			if StatusOf(err) != 400 {
				t.Errorf("from a continuation before the pruned records: %v, want 400", err)
			}
			if docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: coll}); len(docs) != 1501 {
				t.Errorf("the latest-version feed lost items to the retention: %d, want 1501", len(docs))
			}
		})
	}
}

// TestChangeLogNeedsPolicy: as in Cosmos, only a container with a
// changeFeedPolicy has the all-versions-and-deletes feed; the others log
// nothing, answer 400 to that mode, and keep their latest-version feed.
// Removing the policy drops the records kept.
func TestChangeLogNeedsPolicy(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"plain","partitionKey":{"paths":["/pk"]}}`)
	createContainer(t, e, `{"id":"logged","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":10}}`)
	for _, coll := range []string{"plain", "logged"} {
		upsert(t, e, coll, `{"id":"a","pk":"p"}`)
		upsert(t, e, coll, `{"id":"a","pk":"p","v":2}`)
	}
	if n := countChangeRecords(t, e, "plain"); n != 0 {
		t.Errorf("the container without a policy holds %d change records", n)
	}
	_, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "plain", Mode: AllVersionsAndDeletes})
	if StatusOf(err) != 400 || !strings.Contains(err.Error(), "changeFeedPolicy") {
		t.Errorf("all versions and deletes without a policy: %v, want 400 naming changeFeedPolicy", err)
	}
	if docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "plain"}); len(docs) != 1 {
		t.Errorf("latest-version feed without a policy: %d items, want 1", len(docs))
	}
	if docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "logged", Mode: AllVersionsAndDeletes}); len(docs) != 2 {
		t.Errorf("with a policy: %d records, want 2", len(docs))
	}

	if _, err := e.ReplaceContainer(ctx, "db", "logged", []byte(`{"id":"logged","partitionKey":{"paths":["/pk"]}}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sweeper.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countChangeRecords(t, e, "logged"); n != 0 {
		t.Errorf("after the policy was removed, %d change records are left", n)
	}
}

// countChangeRecords counts a container's all-versions-and-deletes records
// (the horizon key, which sorts first, excluded).
func countChangeRecords(t *testing.T, e *Engine, name string) int {
	ctx := t.Context()
	t.Helper()
	c, err := e.Container(ctx, "db", name)
	if err != nil {
		t.Fatal(err)
	}
	n := countPrefix(t, e, keys.VersionPrefix(c.rid))
	if _, err := e.store.Get(ctx, keys.VersionHorizon(c.rid)); err == nil {
		n--
	}
	return n
}

// TestRewritesWithinASecondKeepOneExpiryEntry: an item rewritten within the
// second of its last write keeps exactly one expiry entry while it may
// expire and none once it may not, and the sweep removes it when it expires.
func TestRewritesWithinASecondKeepOneExpiryEntry(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":-1}`)
	c, _ := e.Container(ctx, "db", "c")
	entries := func() int {
		t.Helper()
		prefix := keys.ExpiryPrefix(c.rid)
		it, err := e.store.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
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
	upsert(t, e, "c", `{"id":"a","pk":"p","ttl":2}`)
	upsert(t, e, "c", `{"id":"a","pk":"p","ttl":2,"n":1}`)
	if got := entries(); got != 1 {
		t.Fatalf("after two writes of one item in one second: %d expiry entries, want 1", got)
	}
	upsert(t, e, "c", `{"id":"b","pk":"p","ttl":2}`)
	upsert(t, e, "c", `{"id":"b","pk":"p","ttl":-1}`)
	if got := entries(); got != 1 {
		t.Fatalf("after b stopped expiring within its second: %d expiry entries, want a's alone", got)
	}
	clock.advance(3 * time.Second)
	n, err := e.sweeper.sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || entries() != 0 {
		t.Fatalf("the sweep deleted %d items and left %d expiry entries, want a deleted and none left", n, entries())
	}
	if _, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "b", PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
		t.Fatalf("b, which never expires, after the sweep: %v", err)
	}
}
