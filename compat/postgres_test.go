package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/orrerytest/onpostgres"
)

// Two servers on one PostgreSQL database are one account to the Go SDK:
// containers made on one are used on the other, conditional increments
// from clients of both are exact, and the change feed read from one lists
// every write made through either, once.
func TestGoSDKTwoServersOnOnePostgresDatabase(t *testing.T) {
	url := onpostgres.URL(t)
	a := orrerytest.StartWith(t, orrerytest.Options{Storage: onpostgres.Storage(url)})
	b := orrerytest.StartWith(t, orrerytest.Options{Storage: onpostgres.Storage(url)})
	ctx := context.Background()
	ca := newContainer(t, a, "db", "c", "/pk")
	cb, err := b.Client.NewContainer("db", "c")
	if err != nil {
		t.Fatal(err)
	}
	pk := azcosmos.NewPartitionKeyString("p")
	upsertJSON(t, cb, "p", map[string]any{"id": "n", "pk": "p", "v": 0})
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for w := range workers {
		c := ca
		if w%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			for done := 0; done < each; {
				cur, err := c.ReadItem(ctx, pk, "n", nil)
				if err != nil {
					t.Error(err)
					return
				}
				var doc changedItem
				if err := json.Unmarshal(cur.Value, &doc); err != nil {
					t.Error(err)
					return
				}
				etag := cur.ETag
				_, err = c.ReplaceItem(ctx, pk, "n", mustJSON(t, map[string]any{"id": "n", "pk": "p", "v": doc.V + 1}),
					&azcosmos.ItemOptions{IfMatchEtag: &etag})
				switch {
				case err == nil:
					done++
				case statusOf(t, err) == 412:
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 20 {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		upsertJSON(t, c, fmt.Sprint("q", i%3), map[string]any{"id": fmt.Sprint("i", i), "pk": fmt.Sprint("q", i%3), "v": 1})
	}
	wg.Wait()
	cur, err := ca.ReadItem(ctx, pk, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc changedItem
	json.Unmarshal(cur.Value, &doc)
	if doc.V != workers*each {
		t.Fatalf("counter = %d after %d conditional increments through two servers", doc.V, workers*each)
	}
	ranges, err := ca.ReadFeedRanges(ctx, nil)
	if err != nil || len(ranges) != 1 {
		t.Fatalf("feed ranges %+v, %v; want one", ranges, err)
	}
	items, _, _ := drainChangeFeed(t, ca, azcosmos.ChangeFeedOptions{FeedRange: &ranges[0]})
	seen := map[string]int{}
	for _, it := range items {
		seen[it.ID]++
	}
	for i := range 20 {
		if id := fmt.Sprint("i", i); seen[id] != 1 {
			t.Errorf("item %s seen %d times in A's change feed, want once", id, seen[id])
		}
	}
	if seen["n"] != 1 {
		t.Errorf("the counter seen %d times in the latest-version feed, want once", seen["n"])
	}
}
