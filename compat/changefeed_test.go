package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// changedItem is what the change feed tests read from each document.
type changedItem struct {
	ID  string `json:"id"`
	PK  string `json:"pk"`
	V   int    `json:"v"`
	LSN uint64 `json:"_lsn"`
}

// drainChangeFeed reads pages from opts, following the SDK's composite
// continuation token, until a page comes back empty; it returns the items,
// the token to resume from and the status of the last (empty) page.
func drainChangeFeed(t *testing.T, c *azcosmos.ContainerClient, opts azcosmos.ChangeFeedOptions) ([]changedItem, string, int) {
	t.Helper()
	var out []changedItem
	for i := 0; i < 1000; i++ {
		resp, err := c.ReadChangeFeed(context.Background(), &opts)
		if err != nil {
			t.Fatalf("ReadChangeFeed: %v", err)
		}
		if resp.ContinuationToken == "" {
			t.Fatal("ReadChangeFeed returned no continuation token")
		}
		for _, raw := range resp.Items {
			var it changedItem
			if err := json.Unmarshal(raw, &it); err != nil {
				t.Fatalf("change feed document %s: %v", raw, err)
			}
			out = append(out, it)
		}
		token := resp.ContinuationToken
		opts.Continuation = &token
		opts.FeedRange = nil
		if len(resp.Items) == 0 {
			return out, token, resp.RawResponse.StatusCode
		}
	}
	t.Fatal("the change feed never ran dry")
	return nil, "", 0
}

func itemIDs(items []changedItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf("%s@%d", it.ID, it.V)
	}
	return out
}

func upsertJSON(t *testing.T, c *azcosmos.ContainerClient, pk string, v any) {
	t.Helper()
	if _, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), mustJSON(t, v), nil); err != nil {
		t.Fatalf("upsert: %v", err)
	}
}

func TestGoSDKChangeFeed(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "feed", "/pk")
	for _, it := range []changedItem{{ID: "a1", PK: "a", V: 1}, {ID: "b1", PK: "b", V: 1}, {ID: "a2", PK: "a", V: 1}} {
		upsertJSON(t, c, it.PK, it)
	}
	ranges, err := c.ReadFeedRanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 1 || ranges[0].MinInclusive != "" || ranges[0].MaxExclusive != "FF" {
		t.Fatalf("feed ranges = %+v, want one range \"\" to FF", ranges)
	}
	whole := ranges[0]
	pkA := azcosmos.NewPartitionKeyString("a")

	// From the beginning, for the feed range and for one partition key.
	all, token, status := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{FeedRange: &whole})
	if got := fmt.Sprint(itemIDs(all)); got != "[a1@1 b1@1 a2@1]" {
		t.Errorf("from the beginning: %s", got)
	}
	if status != http.StatusNotModified {
		t.Errorf("an idle change feed answered %d, want 304", status)
	}
	for _, it := range all {
		if it.LSN == 0 {
			t.Errorf("%s has no _lsn", it.ID)
		}
	}
	onlyA, tokenA, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{FeedRange: &whole, PartitionKey: &pkA})
	if got := fmt.Sprint(itemIDs(onlyA)); got != "[a1@1 a2@1]" {
		t.Errorf("partition key a from the beginning: %s", got)
	}

	// Idle: the continuation gives 304 and stays usable.
	resp, err := c.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{Continuation: &token})
	if err != nil {
		t.Fatal(err)
	}
	if resp.RawResponse.StatusCode != http.StatusNotModified || len(resp.Items) != 0 || resp.ETag == "" {
		t.Errorf("idle read: status %d, %d items, etag %q; want 304 with an etag", resp.RawResponse.StatusCode, len(resp.Items), resp.ETag)
	}

	// From a point in time: only changes at or after it. _ts has whole seconds.
	time.Sleep(1100 * time.Millisecond)
	since := time.Now()
	upsertJSON(t, c, "a", changedItem{ID: "a1", PK: "a", V: 2})
	upsertJSON(t, c, "b", changedItem{ID: "b2", PK: "b", V: 1})
	upsertJSON(t, c, "a", changedItem{ID: "a1", PK: "a", V: 3})
	fromTime, _, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{FeedRange: &whole, StartFrom: &since})
	if got := fmt.Sprint(itemIDs(fromTime)); got != "[b2@1 a1@3]" {
		t.Errorf("from %v: %s, want [b2@1 a1@3]", since, got)
	}

	// From continuations: the latest version of what changed since.
	next, _, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{Continuation: &token})
	if got := fmt.Sprint(itemIDs(next)); got != "[b2@1 a1@3]" {
		t.Errorf("from the continuation: %s, want [b2@1 a1@3]", got)
	}
	nextA, _, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{Continuation: &tokenA, PartitionKey: &pkA})
	if got := fmt.Sprint(itemIDs(nextA)); got != "[a1@3]" {
		t.Errorf("partition key a from its continuation: %s, want [a1@3]", got)
	}

	// Paging: a page size of one still yields every item once.
	paged, _, _ := drainChangeFeed(t, c, azcosmos.ChangeFeedOptions{FeedRange: &whole, MaxItemCount: 1})
	got := itemIDs(paged)
	sort.Strings(got)
	if fmt.Sprint(got) != "[a1@3 a2@1 b1@1 b2@1]" {
		t.Errorf("paged by one: %v", got)
	}
}

func TestGoSDKTimeToLive(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	db, _ := s.Client.NewDatabase("db")
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	mk := func(id string, ttl *int32) *azcosmos.ContainerClient {
		props := azcosmos.ContainerProperties{ID: id, DefaultTimeToLive: ttl,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}
		if _, err := db.CreateContainer(ctx, props, nil); err != nil {
			t.Fatal(err)
		}
		c, _ := db.NewContainer(id)
		return c
	}
	one, never := int32(1), int32(-1)
	type doc struct {
		ID  string `json:"id"`
		PK  string `json:"pk"`
		TTL *int32 `json:"ttl,omitempty"`
	}
	tests := []struct {
		name    string
		c       *azcosmos.ContainerClient
		item    doc
		expires bool
	}{
		{"default 1 s", mk("d1", &one), doc{ID: "x", PK: "p"}, true},
		{"default 1 s, item -1", mk("d1never", &one), doc{ID: "x", PK: "p", TTL: &never}, false},
		{"default -1", mk("dnever", &never), doc{ID: "x", PK: "p"}, false},
		{"default -1, item 1 s", mk("dnever1", &never), doc{ID: "x", PK: "p", TTL: &one}, true},
		{"no default, item 1 s", mk("off", nil), doc{ID: "x", PK: "p", TTL: &one}, false},
	}
	tokens := make([]string, len(tests))
	for i, tt := range tests {
		upsertJSON(t, tt.c, tt.item.PK, tt.item)
		ranges, err := tt.c.ReadFeedRanges(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, tokens[i], _ = drainChangeFeed(t, tt.c, azcosmos.ChangeFeedOptions{FeedRange: &ranges[0]})
	}
	time.Sleep(2100 * time.Millisecond)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p"), "x", nil)
			if got, want := statusOf(t, err) == http.StatusNotFound, tt.expires; got != want {
				t.Errorf("read after 2 s: gone = %v, want %v (%v)", got, want, err)
			}
			pager := tt.c.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKeyString("p"), nil)
			n := 0
			for pager.More() {
				page, err := pager.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n += len(page.Items)
			}
			if got, want := n == 0, tt.expires; got != want {
				t.Errorf("query after 2 s: %d items, want gone = %v", n, want)
			}
			ranges, _ := tt.c.ReadFeedRanges(ctx, nil)
			fromStart, _, _ := drainChangeFeed(t, tt.c, azcosmos.ChangeFeedOptions{FeedRange: &ranges[0]})
			if got, want := len(fromStart) == 0, tt.expires; got != want {
				t.Errorf("change feed from the beginning after 2 s: %d items, want gone = %v", len(fromStart), want)
			}
			again, _, _ := drainChangeFeed(t, tt.c, azcosmos.ChangeFeedOptions{Continuation: &tokens[i]})
			if len(again) != 0 {
				t.Errorf("change feed from the earlier continuation reported %d items; expiry is not a change in latest-version mode", len(again))
			}
		})
	}
}
