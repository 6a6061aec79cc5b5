package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// deadlineEntries counts container c's expiry index entries of items with a
// ttl of their own.
func deadlineEntries(t *testing.T, e *Engine) int {
	ctx := t.Context()
	t.Helper()
	c, _ := e.Container(ctx, "db", "c")
	prefix := keys.ExpiryKindPrefix(c.rid, keys.ExpiryByDeadline)
	keys, _, err := collectKeys(ctx, e.store, prefix, storage.PrefixEnd(prefix), 100000)
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// countQuery runs a query scoped to nothing and returns its single value.
func countQuery(t *testing.T, e *Engine, q string) string {
	t.Helper()
	res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: q, SinglePartitionKeyRange: true})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return fmt.Sprint(string(res.Items[0]))
}

func TestDeleteAllItemsByPartitionKeyDeletesThatPartitionOnly(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":-1,"changeFeedPolicy":{"retentionDuration":60},
		"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/u"]}]}}`)
	n := 3*partitionDeleteChunk + 7 // several transactions
	for i := range n {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"a%d","pk":"A","u":%d,"v":%d,"ttl":3600}`, i, i, i))
	}
	for i := range 5 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"b%d","pk":"B","u":%d,"v":%d}`, i, i, i))
	}
	if k := deadlineEntries(t, e); k != n {
		t.Fatalf("%d expiry entries before the delete, want %d", k, n)
	}
	start, _ := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", Mode: AllVersionsAndDeletes, FromNow: true})
	got, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey("A"))
	if err != nil || got != n {
		t.Fatalf("deleted %d (%v), want %d", got, err, n)
	}
	if c := countQuery(t, e, `SELECT VALUE COUNT(1) FROM c WHERE c.pk = "A"`); c != "0" {
		t.Fatalf("%s items left in A", c)
	}
	if c := countQuery(t, e, `SELECT VALUE COUNT(1) FROM c WHERE c.v >= 0`); c != "5" {
		t.Fatalf("%s items match an indexed filter, want B's 5", c)
	}
	// Expiry entries are gone (only A's items had a ttl of their own).
	if k := deadlineEntries(t, e); k != 0 {
		t.Fatalf("%d expiry entries left after the delete", k)
	}
	// Every delete is in the all-versions-and-deletes feed.
	docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Mode: AllVersionsAndDeletes, Continuation: start.ETag})
	deletes := 0
	for _, r := range decodeDocs[avadDoc](t, docs) {
		if r.Metadata.OperationType == "delete" {
			deletes++
		}
	}
	if deletes != n || len(docs) != n {
		t.Fatalf("the feed has %d records, %d deletes; want %d deletes", len(docs), deletes, n)
	}
	// Unique key entries are gone: the values are free again in A.
	if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", PartitionKey: StringKey("A"), HasPartitionKey: true,
		Body: []byte(`{"id":"again","pk":"A","u":3}`)}); err != nil {
		t.Fatalf("a deleted item's unique value is still taken: %v", err)
	}

	// An empty partition deletes nothing; a missing key is refused.
	if got, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey("Z")); err != nil || got != 0 {
		t.Fatalf("empty partition: %d %v", got, err)
	}
}

func TestDeleteAllItemsByPartitionKeyTakesAHierarchicalPrefix(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/t","/u"],"kind":"MultiHash","version":2}}`)
	for _, it := range []string{`{"id":"1","t":"x","u":"a"}`, `{"id":"2","t":"x","u":"b"}`, `{"id":"3","t":"y","u":"a"}`} {
		upsert(t, e, "c", it)
	}
	pk, _ := ParsePartitionKeyHeader(`["x"]`)
	if got, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", pk); err != nil || got != 2 {
		t.Fatalf("deleted %d (%v) under the prefix [x], want 2", got, err)
	}
	if c := countQuery(t, e, `SELECT VALUE COUNT(1) FROM c`); c != "1" {
		t.Fatalf("%s items left, want 1", c)
	}
	full, _ := ParsePartitionKeyHeader(`["y","a"]`)
	if got, _ := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", full); got != 1 {
		t.Fatalf("deleted %d under the full key [y,a], want 1", got)
	}
}

func TestPartitionKeyDeleteDoesNotHoldUpOtherPartitions(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	const n = 5200 // many transactions of partitionDeleteChunk
	for i := 0; i < n; i += 100 {
		ops := make([]string, 0, 100)
		for k := i; k < i+100; k++ {
			ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"%d","pk":"A"}}`, k))
		}
		parsed, _ := ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
		if res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("A"), HasPartitionKey: true, Atomic: true, Operations: parsed}); err != nil || res.Failed {
			t.Fatal(err)
		}
	}
	done := make(chan int)
	go func() {
		n, _ := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey("A"))
		done <- n
	}()
	// Writes to B go on while A is being deleted: some finish before it does.
	during := 0
	for i := 0; ; i++ {
		select {
		case got := <-done:
			if got != n {
				t.Fatalf("deleted %d, want %d", got, n)
			}
			if during == 0 {
				t.Fatal("no write to another partition finished while the partition delete ran")
			}
			t.Logf("%d writes to another partition finished during the delete", during)
			return
		default:
		}
		upsert(t, e, "c", fmt.Sprintf(`{"id":"b%d","pk":"B"}`, i))
		during++
	}
}
