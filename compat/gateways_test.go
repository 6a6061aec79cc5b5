package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/orrerytest/onpostgres"
)

// The tests of this file run three gateways (orrery servers) on one
// PostgreSQL database, with the Go SDK's clients spread round-robin across
// them, and check that together they keep the guarantees of one server.
// They run in the suite's PostgreSQL pass only (they start their own
// gateways on PostgreSQL either way), and are skipped without PostgreSQL
// unless ORRERY_REQUIRE_POSTGRES=1.

const gatewayCount = 3

// startGateways starts the three gateways, each with opts, or skips the
// test outside the PostgreSQL pass.
func startGateways(t *testing.T, opts orrerytest.Options) []*orrerytest.Server {
	t.Helper()
	if !onpostgres.Selected() {
		t.Skip("runs in the suite's PostgreSQL pass")
	}
	return onpostgres.StartGateways(t, gatewayCount, opts)
}

// gatewayContainers creates container coll of database db (partition key
// /pk) through the first gateway and returns its client on every gateway.
func gatewayContainers(t *testing.T, gws []*orrerytest.Server, db, coll string) []*azcosmos.ContainerClient {
	t.Helper()
	cs := []*azcosmos.ContainerClient{newContainer(t, gws[0], db, coll, "/pk")}
	for _, g := range gws[1:] {
		c, err := g.Client.NewContainer(db, coll)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// Reads, ETag-conditional replaces, patch increments and two-item batches
// on hot items, each client on its own gateway, are linearizable.
func TestGatewaysHotItemsAreLinearizable(t *testing.T) {
	gws := startGateways(t, orrerytest.Options{})
	checkLinearizable(t, gatewayContainers(t, gws, "db", "hot"), 120)
}

// Seed 001's counter race through three gateways: 20 writers make 200
// read-then-replace-with-ETag increments each, retrying on 412, and the
// counter ends at exactly 4,000. (Without an ETag the same race loses
// updates: TestSeed001Counter.)
func TestGatewaysETagCounterRaceEndsExact(t *testing.T) {
	gws := startGateways(t, orrerytest.Options{})
	cs := gatewayContainers(t, gws, "shop", "counters")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("views")
	upsertJSON(t, cs[0], "views", map[string]any{"id": "views", "pk": "views", "views": 0})
	const writers, each = 20, 200
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		c := cs[w%len(cs)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 4000))
			for range each {
				for attempt := 0; ; attempt++ {
					r, err := c.ReadItem(ctx, pk, "views", nil)
					if err != nil {
						t.Error(err)
						return
					}
					var d map[string]any
					json.Unmarshal(r.Value, &d)
					d["views"] = d["views"].(float64) + 1
					_, err = c.ReplaceItem(ctx, pk, "views", mustJSON(t, d), &azcosmos.ItemOptions{IfMatchEtag: &r.ETag})
					if err == nil {
						break
					}
					if statusOf(t, err) != http.StatusPreconditionFailed {
						t.Error(err)
						return
					}
					conflicts.Add(1)
					// Back off with jitter, as the seeds advise: 20
					// writers retrying at once mostly refuse each other.
					time.Sleep(time.Duration(rng.Int64N(int64(4*time.Millisecond) << min(attempt, 6))))
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, c := range cs {
		d, _ := readDoc(t, c, pk, "views")
		if v := d["views"].(float64); v != writers*each {
			t.Errorf("gateway %d reads the counter at %v after %d increments, want exactly %d", i, v, writers*each, writers*each)
		}
	}
	t.Logf("%d increments, %d refused with 412 and retried", writers*each, conflicts.Load())
}

// Seed 001's seat race through three gateways: each seat id can be created
// once, in one batch with its order; of the buyers racing for a seat from
// every gateway exactly one is sold it, the others get [409, 424], and only
// the winners' orders exist.
func TestGatewaysSeatRaceSellsEachSeatOnce(t *testing.T) {
	gws := startGateways(t, orrerytest.Options{})
	cs := gatewayContainers(t, gws, "shop", "seats")
	ctx := context.Background()
	e1 := azcosmos.NewPartitionKeyString("e1")
	book := func(c *azcosmos.ContainerClient, seat, buyer string) string {
		b := c.NewTransactionalBatch(e1)
		b.CreateItem(mustJSON(t, map[string]any{"id": seat, "pk": "e1", "buyer": buyer}), nil)
		b.CreateItem(mustJSON(t, map[string]any{"id": "order-" + seat + "-" + buyer, "pk": "e1"}), nil)
		resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil {
			t.Errorf("batch: %v", err)
			return "error"
		}
		if resp.Success {
			return "sold"
		}
		return "rejected " + pyList(statusCodes(resp))
	}
	if got := book(cs[0], "A12", "ann"); got != "sold" {
		t.Fatalf("ann books A12 on gateway 0: %s", got)
	}
	for i, c := range cs[1:] {
		if got := book(c, "A12", fmt.Sprint("ben", i)); got != "rejected [409, 424]" {
			t.Errorf("a second buyer books A12 on gateway %d: %s, want rejected [409, 424]", i+1, got)
		}
	}
	const seats, buyers = 10, 9
	for s := range seats {
		seat := fmt.Sprint("B", s)
		results := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range buyers {
			wg.Go(func() {
				<-start
				r := book(cs[i%len(cs)], seat, fmt.Sprint("fan", i))
				mu.Lock()
				results[r]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if results["sold"] != 1 || results["rejected [409, 424]"] != buyers-1 {
			t.Errorf("%d buyers on %d gateways race for %s: %v, want one sold and the rest rejected [409, 424]", buyers, len(cs), seat, results)
		}
	}
	rows := queryRows(t, cs[2], "SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'order-')", e1)
	if got, want := rawList(rows), fmt.Sprintf("[%d]", 1+seats); got != want {
		t.Errorf("orders in e1: %s, want %s", got, want)
	}
}

// A create of one id raced from every gateway succeeds once (201); every
// other gets 409, and the item is the winner's.
func TestGatewaysCreateRaceYieldsOneCreated(t *testing.T) {
	gws := startGateways(t, orrerytest.Options{})
	cs := gatewayContainers(t, gws, "db", "creates")
	ctx := context.Background()
	const rounds, racers = 20, 2 * gatewayCount
	for r := range rounds {
		id, pkv := fmt.Sprint("x", r), fmt.Sprint("p", r%4)
		pk := azcosmos.NewPartitionKeyString(pkv)
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				_, err := cs[i%len(cs)].CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": id, "pk": pkv, "racer": i}), nil)
				var re *azcore.ResponseError
				switch {
				case err == nil:
					statuses[i] = http.StatusCreated
				case errors.As(err, &re):
					statuses[i] = re.StatusCode
				default:
					t.Errorf("racer %d: %v", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		winner := slices.Index(statuses, http.StatusCreated)
		if winner < 0 || slices.Index(statuses[winner+1:], http.StatusCreated) >= 0 {
			t.Fatalf("round %d: statuses %v from racers on gateways 0, 1, 2, 0, 1, 2 in turn, want exactly one 201", r, statuses)
		}
		for i, s := range statuses {
			if i != winner && s != http.StatusConflict {
				t.Fatalf("round %d: racer %d got %d, want 409", r, i, s)
			}
		}
		d, _ := readDoc(t, cs[r%len(cs)], pk, id)
		if d["racer"] != float64(winner) {
			t.Fatalf("round %d: the item is racer %v's, but racer %d got the 201", r, d["racer"], winner)
		}
	}
}

// A change-feed reader on gateway A, following its continuation while 16
// writers create items in 64 partitions through gateways B and C, reads
// every item exactly once: none commits behind the reader's position.
func TestGatewaysChangeFeedOnAMissesNothingWrittenThroughBAndC(t *testing.T) {
	const (
		writers    = 16
		partitions = 64
		each       = 60
	)
	gws := startGateways(t, orrerytest.Options{})
	cs := gatewayContainers(t, gws, "db", "feed")
	ctx := context.Background()
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		c := cs[1+w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 15))
			for n := range each {
				pk := fmt.Sprint("p", rng.IntN(partitions))
				body := fmt.Sprintf(`{"id":"w%d-%d","pk":%q}`, w, n, pk)
				if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(body), nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[string]int{}
	var pages int
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		pages = followChangeFeed(ctx, t, cs[0], 100, &done, func(raw []byte) error {
			var it changedItem
			if err := json.Unmarshal(raw, &it); err != nil {
				return err
			}
			seen[it.ID]++
			return nil
		})
	}()
	wg.Wait()
	done.Store(true)
	<-readerDone
	if t.Failed() {
		return
	}
	var wrong []string
	for w := range writers {
		for n := range each {
			if id := fmt.Sprintf("w%d-%d", w, n); seen[id] != 1 {
				wrong = append(wrong, fmt.Sprintf("%s x%d", id, seen[id]))
			}
		}
	}
	if len(seen) != writers*each || len(wrong) > 0 {
		t.Errorf("gateway A's change feed read %d distinct items of %d created through B and C; read other than once: %s",
			len(seen), writers*each, strings.Join(wrong[:min(len(wrong), 20)], ", "))
	}
	t.Logf("%d creates through B and C, read on A in %d pages", writers*each, pages)
}

// A database and container created through gateway A are usable through B
// and C at once; deleted on A, the container is gone on B and C at once,
// and created again on A with another partition key, B and C write by the
// new definition.
func TestGatewaysContainerCreatedOnAIsUsableOnBAtOnce(t *testing.T) {
	gws := startGateways(t, orrerytest.Options{})
	ctx := context.Background()
	for round := range 5 {
		db := fmt.Sprint("db", round)
		cs := gatewayContainers(t, gws, db, "c")
		for i, c := range cs[1:] {
			upsertJSON(t, c, "p", map[string]any{"id": fmt.Sprint("from", i+1), "pk": "p"})
		}
		for i := 1; i < len(cs); i++ {
			if _, err := cs[0].ReadItem(ctx, azcosmos.NewPartitionKeyString("p"), fmt.Sprint("from", i), nil); err != nil {
				t.Fatalf("round %d: gateway A reads the item written through gateway %d: %v", round, i, err)
			}
		}
		if _, err := cs[0].Delete(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for i, c := range cs[1:] {
			_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString("p"), mustJSON(t, map[string]any{"id": "late", "pk": "p"}), nil)
			if statusOf(t, err) != http.StatusNotFound {
				t.Fatalf("round %d: a write through gateway %d into the container just deleted on A: %v, want 404", round, i+1, err)
			}
		}
		d, err := gws[0].Client.NewDatabase(db)
		if err != nil {
			t.Fatal(err)
		}
		props := azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/other"}}}
		if _, err := d.CreateContainer(ctx, props, nil); err != nil {
			t.Fatal(err)
		}
		for i, c := range cs[1:] {
			_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString("q"), mustJSON(t, map[string]any{"id": "new", "other": "q"}), nil)
			if err != nil {
				t.Fatalf("round %d: a write by the new partition key /other through gateway %d: %v", round, i+1, err)
			}
		}
	}
}

// With a short sweep interval on every gateway, items with a TTL expire and
// are deleted once: the all-versions-and-deletes feed holds one
// TTL-expired delete per item, and the gateways' sweepers together count
// each item once.
func TestGatewaysTTLItemsExpireOnce(t *testing.T) {
	const items = 200
	gws := startGateways(t, orrerytest.Options{Engine: engine.Options{SweepInterval: 20 * time.Millisecond}})
	ctx := context.Background()
	if _, err := gws[0].Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	// The SDK cannot set a change feed policy, which the all-versions feed
	// needs: the container is created through gateway A's engine.
	if _, err := gws[0].Engine.CreateContainer(ctx, "db", []byte(`{"id":"ttl","partitionKey":{"paths":["/pk"]},"defaultTtl":1,"changeFeedPolicy":{"retentionDuration":60}}`), nil); err != nil {
		t.Fatal(err)
	}
	var cs []*azcosmos.ContainerClient
	for _, g := range gws {
		c, err := g.Client.NewContainer("db", "ttl")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for i := range items {
		upsertJSON(t, cs[i%len(cs)], fmt.Sprint("p", i%8), map[string]any{"id": fmt.Sprint("t", i), "pk": fmt.Sprint("p", i%8)})
	}
	swept := func() uint64 {
		var n uint64
		for _, g := range gws {
			st, err := g.Engine.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += st.TTLSwept
		}
		return n
	}
	// A bound, not a timing claim: the items expire after 1 s and the
	// sweepers delete them soon after, however loaded the machine.
	for deadline := time.Now().Add(2 * time.Minute); swept() < items && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	// More sweeps, on whichever gateway leads, must find nothing left.
	time.Sleep(10 * 20 * time.Millisecond)
	if n := swept(); n != items {
		t.Errorf("the gateways' sweepers deleted %d items, want each of the %d once", n, items)
	}
	for i := range items {
		_, err := cs[(i+1)%len(cs)].ReadItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprint("p", i%8)), fmt.Sprint("t", i), nil)
		if statusOf(t, err) != http.StatusNotFound {
			t.Fatalf("item t%d read after it expired: %v, want 404", i, err)
		}
	}
	deletes := map[string]int{}
	req := engine.ChangeFeedRequest{Database: "db", Container: "ttl", Mode: engine.AllVersionsAndDeletes}
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("the all-versions feed never ran dry")
		}
		res, err := gws[1].Engine.ReadChangeFeed(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range res.Items {
			var rec struct {
				Metadata struct {
					OperationType     string `json:"operationType"`
					ID                string `json:"id"`
					TimeToLiveExpired bool   `json:"timeToLiveExpired"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Metadata.OperationType == "delete" {
				if !rec.Metadata.TimeToLiveExpired {
					t.Errorf("a delete record of %s not marked timeToLiveExpired: %s", rec.Metadata.ID, raw)
				}
				deletes[rec.Metadata.ID]++
			}
		}
		req.Continuation = res.ETag
		if res.NotModified {
			break
		}
	}
	var wrong []string
	for i := range items {
		if id := fmt.Sprint("t", i); deletes[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s x%d", id, deletes[id]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d items have other than one delete record in the all-versions-and-deletes feed: %s",
			len(wrong), items, strings.Join(wrong[:min(len(wrong), 20)], ", "))
	}
}
