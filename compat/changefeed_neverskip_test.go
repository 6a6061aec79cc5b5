package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// TestGoSDKChangeFeedNeverSkips has 16 writers upsert into 64 partitions
// through the Go SDK while a reader follows the change feed's continuation
// tokens; once the writers are done and the feed is dry, the reader's latest
// version of every item equals what a query reads. (The engine's test of the
// same name runs 100,000 writes with deletes; this one checks the wire path.)
func TestGoSDKChangeFeedNeverSkips(t *testing.T) {
	const (
		writers    = 16
		partitions = 64
		idsPer     = 8
	)
	total := 4000
	if testing.Short() {
		total = 1000
	}
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "neverskip", "/pk")

	type version struct {
		ID   string `json:"id"`
		PK   string `json:"pk"`
		V    int    `json:"v"`
		ETag string `json:"_etag"`
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for n := range total / writers {
				pk := fmt.Sprintf("p%d", rng.IntN(partitions))
				body := fmt.Sprintf(`{"id":"i%d","pk":%q,"v":%d}`, rng.IntN(idsPer), pk, w*1_000_000+n)
				if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(body), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}

	seen := map[string]version{}
	var pages int
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		pages = followChangeFeed(ctx, t, c, 500, &done, func(raw []byte) error {
			var v version
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			seen[v.PK+"/"+v.ID] = v
			return nil
		})
	}()
	wg.Wait()
	done.Store(true)
	<-readerDone
	if t.Failed() {
		return
	}

	final := map[string]version{}
	pager := c.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			var v version
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			final[v.PK+"/"+v.ID] = v
		}
	}
	t.Logf("%d writes, %d items, %d change feed pages read", total, len(final), pages)
	if len(seen) != len(final) {
		t.Errorf("the change feed reported %d items, the container holds %d", len(seen), len(final))
	}
	for k, want := range final {
		if got := seen[k]; got.ETag != want.ETag || got.V != want.V {
			t.Errorf("%s: the change feed's latest version is v %d (%s), the stored one v %d (%s)", k, got.V, got.ETag, want.V, want.ETag)
		}
	}
}

// followChangeFeed reads c's change feed from the beginning, pageSize
// changes a page, following continuation tokens and handing each change to
// each, until a page comes back empty that was asked for after done was set
// (so every write finished before done is read). It returns the number of
// pages read; an error is reported on t and ends the reading.
func followChangeFeed(ctx context.Context, t *testing.T, c *azcosmos.ContainerClient, pageSize int32, done *atomic.Bool, each func(raw []byte) error) (pages int) {
	ranges, err := c.ReadFeedRanges(ctx, nil)
	if err != nil {
		t.Error(err)
		return pages
	}
	opts := azcosmos.ChangeFeedOptions{FeedRange: &ranges[0], MaxItemCount: pageSize}
	for {
		finished := done.Load()
		resp, err := c.ReadChangeFeed(ctx, &opts)
		if err != nil {
			t.Error(err)
			return pages
		}
		pages++
		for _, raw := range resp.Items {
			if err := each(raw); err != nil {
				t.Error(err)
				return pages
			}
		}
		token := resp.ContinuationToken
		opts.Continuation, opts.FeedRange = &token, nil
		if len(resp.Items) == 0 {
			if finished {
				return pages
			}
			time.Sleep(time.Millisecond)
		}
	}
}
