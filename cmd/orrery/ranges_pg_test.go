package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/jackc/pgx/v5"

	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// Three gateways on two PostgreSQL databases act as one database: the
// containers' partition key ranges are spread over both (items of each
// land in one, and both hold some), the seeds' races come out exact
// across gateways, and a gateway that has not seen a split learns it on
// its next request.
func TestRangesOverTwoDatabasesActAsOneAcrossGateways(t *testing.T) {
	needPostgres(t)
	urls := []string{pgtest.URL(t), pgtest.URL(t)}
	f := startGateways(t, 3, "--postgres", urls[0], "--postgres", urls[1], "--postgres-pool", "8",
		"--partition-key-ranges", "4", "--access-log=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, _ := f.clients[0].NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "r",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}, Version: 2}}, nil); err != nil {
		t.Fatal(err)
	}
	conts := make([]*azcosmos.ContainerClient, len(f.clients))
	for i, c := range f.clients {
		conts[i], _ = c.NewContainer("db", "r")
	}

	t.Run("ItemsLandOnBothDatabases", func(t *testing.T) {
		const items = 120
		for i := range items {
			pk := fmt.Sprint("p", i)
			if _, err := conts[i%3].CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"i%d","pk":%q,"n":%d}`, i, pk, i), nil); err != nil {
				t.Fatal(err)
			}
		}
		var counts []int
		for _, url := range urls {
			counts = append(counts, itemRows(t, ctx, url))
		}
		if counts[0] == 0 || counts[1] == 0 || counts[0]+counts[1] != items {
			t.Fatalf("item rows per database: %v, want %d spread over both", counts, items)
		}
		// A cross-partition query through every gateway fans out over
		// both databases' ranges and sees every item once.
		for g, c := range conts {
			if got := queryCount(t, ctx, c, "SELECT VALUE c.id FROM c"); got != items {
				t.Errorf("gateway %d counts %d items, want %d", g, got, items)
			}
		}
		t.Logf("item rows per database: %v", counts)
	})

	t.Run("ETagCounterRaceEndsExact", func(t *testing.T) {
		// Counters in several partitions, so on both databases; each
		// incremented by writers on every gateway with read and
		// replace-if-match, retried on 412.
		const counters, writers, each = 4, 12, 25
		for k := range counters {
			pk := fmt.Sprint("hot", k)
			if _, err := conts[0].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"n","pk":%q,"n":0}`, pk), nil); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				c := conts[w%3]
				for i := range each {
					pk := azcosmos.NewPartitionKeyString(fmt.Sprint("hot", (w+i)%counters))
					for attempt := 0; ; attempt++ {
						r, err := c.ReadItem(ctx, pk, "n", nil)
						if err != nil {
							t.Error(err)
							return
						}
						var d map[string]any
						json.Unmarshal(r.Value, &d)
						d["n"] = d["n"].(float64) + 1
						body, _ := json.Marshal(d)
						if _, err = c.ReplaceItem(ctx, pk, "n", body, &azcosmos.ItemOptions{IfMatchEtag: &r.ETag}); err == nil {
							break
						}
						if status(err) != http.StatusPreconditionFailed {
							t.Error(err)
							return
						}
						time.Sleep(time.Duration(attempt%8) * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		for g, c := range conts {
			total := 0.0
			for k := range counters {
				r, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprint("hot", k)), "n", nil)
				if err != nil {
					t.Fatal(err)
				}
				var d map[string]any
				json.Unmarshal(r.Value, &d)
				total += d["n"].(float64)
			}
			if total != writers*each {
				t.Errorf("gateway %d reads the counters summing to %v after %d increments", g, total, writers*each)
			}
		}
	})

	t.Run("CreateRaceYieldsOneCreated", func(t *testing.T) {
		for r := range 12 {
			id, pkv := fmt.Sprint("x", r), fmt.Sprint("c", r)
			statuses := make([]int, 6)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range statuses {
				wg.Go(func() {
					<-start
					_, err := conts[i%3].CreateItem(ctx, azcosmos.NewPartitionKeyString(pkv), fmt.Appendf(nil, `{"id":%q,"pk":%q}`, id, pkv), nil)
					statuses[i] = status(err)
				})
			}
			close(start)
			wg.Wait()
			slices.Sort(statuses)
			if want := []int{201, 409, 409, 409, 409, 409}; !slices.Equal(statuses, want) {
				t.Fatalf("round %d: statuses %v, want %v", r, statuses, want)
			}
		}
	})

	t.Run("SeatRaceSellsEachSeatOnce", func(t *testing.T) {
		for s := range 6 {
			event := fmt.Sprint("e", s) // a partition each, over both databases
			seat := "A1"
			results := map[string]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 6 {
				wg.Go(func() {
					<-start
					c := conts[i%3]
					b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(event))
					b.CreateItem(fmt.Appendf(nil, `{"id":%q,"pk":%q,"buyer":%d}`, seat, event, i), nil)
					b.CreateItem(fmt.Appendf(nil, `{"id":"order-%d","pk":%q}`, i, event), nil)
					resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
					r := "error"
					switch {
					case err != nil:
						t.Error(err)
					case resp.Success:
						r = "sold"
					default:
						r = "rejected"
					}
					mu.Lock()
					results[r]++
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			if results["sold"] != 1 || results["rejected"] != 5 {
				t.Errorf("six buyers on three gateways race for %s/%s: %v, want one sold", event, seat, results)
			}
			if got := queryCount(t, ctx, conts[s%3], fmt.Sprintf("SELECT VALUE c.id FROM c WHERE c.pk = %q AND STARTSWITH(c.id, 'order-')", event)); got != 1 {
				t.Errorf("orders in %s: %d, want the winner's only", event, got)
			}
		}
	})

	t.Run("ChangeFeedOfEachRangeSeesEachWriteOnce", func(t *testing.T) {
		// One reader per range on gateway 1, following its continuation
		// while writers create items through gateways 0 and 2: each item
		// comes once, from the range that holds it, on either database.
		ranges := pkRanges(t, ctx, f.gateways[1].endpoint, "db", "r")
		etags := make([]string, len(ranges))
		for i, id := range ranges {
			_, etags[i] = rangeFeed(t, ctx, f.gateways[1].endpoint, "db", "r", id, "", true)
		}
		const writers, each = 8, 25
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						pk := fmt.Sprint("f", w, "-", i%5)
						if _, err := conts[[]int{0, 2}[w%2]].CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"feed-%d-%d","pk":%q}`, w, i, pk), nil); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}()
		seen := map[string]int{}
		for finished := false; ; {
			select {
			case <-done:
				finished = true
			default:
			}
			for i, id := range ranges {
				var ids []string
				ids, etags[i] = rangeFeed(t, ctx, f.gateways[1].endpoint, "db", "r", id, etags[i], false)
				for _, d := range ids {
					if strings.HasPrefix(d, "feed-") {
						seen[d]++
					}
				}
			}
			if finished && len(seen) >= writers*each || ctx.Err() != nil {
				break
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("item %s read %d times", id, n)
			}
		}
		if len(seen) != writers*each {
			t.Errorf("the range readers saw %d items, want %d", len(seen), writers*each)
		}
	})

	t.Run("GatewayWithAStaleRangeMapIsCorrected", func(t *testing.T) {
		// Gateway 2 reads the ranges, gateway 0 splits one: gateway 2's
		// next requests know it, with no restart and no wait.
		before := pkRanges(t, ctx, f.gateways[2].endpoint, "db", "r")
		if len(before) != 4 {
			t.Fatalf("ranges before the split: %v, want 4", before)
		}
		splitRange(t, ctx, f.gateways[0].endpoint, "db", "r", "0")
		after := pkRanges(t, ctx, f.gateways[2].endpoint, "db", "r")
		if len(after) != 5 || slices.Contains(after, "0") {
			t.Fatalf("gateway 2 lists ranges %v after gateway 0 split range 0, want 5 without 0", after)
		}
		if st, sub := rangeFeedStatus(t, ctx, f.gateways[1].endpoint, "db", "r", "0"); st != 410 || sub != "1002" {
			t.Errorf("gateway 1 reads the change feed of the split range: %d/%s, want 410/1002", st, sub)
		}
		// Writes through every gateway after the split go where the
		// items are read from, on whichever database.
		rows := itemRows(t, ctx, urls[0]) + itemRows(t, ctx, urls[1])
		for i := range 30 {
			pk := fmt.Sprint("s", i)
			if _, err := conts[(i+1)%3].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"after","pk":%q}`, pk), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := conts[(i+2)%3].ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), "after", nil); err != nil {
				t.Fatalf("item %s written after the split: %v", pk, err)
			}
		}
		if got := itemRows(t, ctx, urls[0]) + itemRows(t, ctx, urls[1]); got != rows+30 {
			t.Errorf("item rows after 30 more: %d, want %d", got, rows+30)
		}
	})

	t.Run("SplitMovesARangeOnlineUnderSixteenWriters", func(t *testing.T) {
		moveUnderWriters(t, ctx, f, conts, urls, "1")
	})
}

// moveUnderWriters splits range id through gateway 0 while 16 writers
// create items through the three gateways and a reader on gateway 1
// follows the range's change feed: the split moves the second child to the
// other database. Every acknowledged item is read back through every
// gateway, stored once, and read by the feed reader once, which follows
// the range into its children from its own continuation.
func moveUnderWriters(t *testing.T, ctx context.Context, f *pgFleet, conts []*azcosmos.ContainerClient, urls []string, id string) {
	rowsBefore := itemRows(t, ctx, urls[0]) + itemRows(t, ctx, urls[1])
	_, cont := rangeFeed(t, ctx, f.gateways[1].endpoint, "db", "r", id, "", true)
	var mu sync.Mutex
	acked := map[string]string{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				item, pk := fmt.Sprintf("m%d-%d", w, i), fmt.Sprint("m", i%50)
				if _, err := conts[w%3].CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":%q,"pk":%q}`, item, pk), nil); err != nil {
					t.Errorf("create %s: %v", item, err)
					return
				}
				mu.Lock()
				acked[item] = pk
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	seen := map[string]int{}
	note := func(ids []string) {
		for _, d := range ids {
			if strings.HasPrefix(d, "m") {
				seen[d]++
			}
		}
	}
	for count() < 150 && !t.Failed() {
		var ids []string
		ids, cont = rangeFeed(t, ctx, f.gateways[1].endpoint, "db", "r", id, cont, false)
		note(ids)
	}
	atSplit := count()
	began := time.Now()
	children := splitRange(t, ctx, f.gateways[0].endpoint, "db", "r", id)
	held := time.Since(began) // the split holds writers for at most its whole call
	if st, sub := rangeFeedStatus(t, ctx, f.gateways[1].endpoint, "db", "r", id); st != 410 || sub != "1002" {
		t.Errorf("the feed of the split range: %d/%s, want 410/1002", st, sub)
	}
	conts2 := []string{cont, cont}
	for done := false; !done; {
		if count() >= atSplit+300 || t.Failed() {
			stop.Store(true)
			wg.Wait()
			done = true
		}
		for i, ch := range children {
			for {
				ids, next := rangeFeed(t, ctx, f.gateways[1].endpoint, "db", "r", ch, conts2[i], false)
				note(ids)
				conts2[i] = next
				if len(ids) == 0 || !done {
					break
				}
			}
		}
	}
	// Every acknowledged item was in range id or elsewhere: the reader
	// saw those of the range once, and no other.
	inRange := 0
	for item, pk := range acked {
		if _, err := conts[len(item)%3].ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), item, nil); err != nil {
			t.Fatalf("acknowledged item %s: %v", item, err)
		}
		switch n := seen[item]; n {
		case 0:
		case 1:
			inRange++
		default:
			t.Errorf("the reader saw %s %d times", item, n)
		}
	}
	if inRange == 0 || len(seen) != inRange {
		t.Errorf("the reader saw %d items, %d of them acknowledged", len(seen), inRange)
	}
	if got := itemRows(t, ctx, urls[0]) + itemRows(t, ctx, urls[1]); got != rowsBefore+len(acked) {
		t.Errorf("item rows: %d, want %d before and %d acknowledged", got, rowsBefore, len(acked))
	}
	t.Logf("%d writes acknowledged (%d before the split), %d in the moved range's feed; the split took %v", len(acked), atSplit, inRange, held.Round(time.Millisecond))
}

// itemRows counts the item records (key family 'D') in the database at url.
func itemRows(t *testing.T, ctx context.Context, url string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM orrery_kv WHERE k >= $1 AND k < $2`, []byte("D"), []byte("E")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// queryCount runs a query across partitions and counts the results.
func queryCount(t *testing.T, ctx context.Context, c *azcosmos.ContainerClient, q string) int {
	t.Helper()
	pager := c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), nil)
	total := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += len(page.Items)
	}
	return total
}

// status is an SDK error's HTTP status, 201 for none.
func status(err error) int {
	var re *azcore.ResponseError
	switch {
	case err == nil:
		return http.StatusCreated
	case errors.As(err, &re):
		return re.StatusCode
	}
	return -1
}

var insecure = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// signed sends a request signed with the emulator's key.
func signed(t *testing.T, ctx context.Context, method, url, resType, link string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(server.EmulatorKey, method, resType, link, date)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, nil)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Authorization", auth)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := insecure.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// pkRanges lists a container's partition key range ids through endpoint.
func pkRanges(t *testing.T, ctx context.Context, endpoint, db, coll string) []string {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll
	st, _, body := signed(t, ctx, "GET", strings.TrimSuffix(endpoint, "/")+"/"+link+"/pkranges", "pkranges", link, nil)
	if st != 200 {
		t.Fatalf("pkranges: %d %s", st, body)
	}
	var feed struct {
		Ranges []struct {
			ID string `json:"id"`
		} `json:"PartitionKeyRanges"`
	}
	if err := json.Unmarshal(body, &feed); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range feed.Ranges {
		ids = append(ids, r.ID)
	}
	return ids
}

// splitRange splits range id through endpoint's administrative call and
// returns the children's ids.
func splitRange(t *testing.T, ctx context.Context, endpoint, db, coll, id string) []string {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll + "/pkranges/" + id
	st, _, body := signed(t, ctx, "POST", strings.TrimSuffix(endpoint, "/")+"/_admin/"+link+"/split", "pkranges", link, nil)
	if st != 200 {
		t.Fatalf("split of range %s: %d %s", id, st, body)
	}
	var feed struct {
		Ranges []struct {
			ID string `json:"id"`
		} `json:"PartitionKeyRanges"`
	}
	if err := json.Unmarshal(body, &feed); err != nil || len(feed.Ranges) != 2 {
		t.Fatalf("split of range %s answered %s", id, body)
	}
	return []string{feed.Ranges[0].ID, feed.Ranges[1].ID}
}

// rangeFeedStatus reads the change feed of one range through endpoint and
// returns the status and substatus.
func rangeFeedStatus(t *testing.T, ctx context.Context, endpoint, db, coll, id string) (int, string) {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll
	st, h, _ := signed(t, ctx, "GET", strings.TrimSuffix(endpoint, "/")+"/"+link+"/docs", "docs", link, map[string]string{
		"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": id,
	})
	return st, h.Get("x-ms-substatus")
}

// rangeFeed reads one page of range id's change feed from continuation
// etag ("" with fromNow: from now on) and returns the item ids and the
// next continuation.
func rangeFeed(t *testing.T, ctx context.Context, endpoint, db, coll, id, etag string, fromNow bool) ([]string, string) {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll
	h := map[string]string{"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": id, "x-ms-max-item-count": "100"}
	if etag != "" {
		h["If-None-Match"] = etag
	} else if fromNow {
		h["If-None-Match"] = "*"
	}
	st, hdr, body := signed(t, ctx, "GET", strings.TrimSuffix(endpoint, "/")+"/"+link+"/docs", "docs", link, h)
	switch st {
	case http.StatusNotModified:
		return nil, hdr.Get("Etag")
	case http.StatusOK:
	default:
		t.Fatalf("change feed of range %s: %d %s", id, st, body)
	}
	var page struct {
		Documents []struct {
			ID string `json:"id"`
		}
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range page.Documents {
		ids = append(ids, d.ID)
	}
	return ids, hdr.Get("Etag")
}
