package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChangeFeedNeverSkips runs 16 writers over 64 logical partitions while a
// latest-version reader and an all-versions-and-deletes reader follow
// continuations. At the end the latest-version reader's view equals the final
// state, and the all-versions reader saw exactly the write log: every
// create/replace once, every delete once, in a valid order per item.
func TestChangeFeedNeverSkips(t *testing.T) {
	ctx := t.Context()
	const (
		writers    = 16
		partitions = 64
		idsPer     = 16
	)
	total := 100000
	if testing.Short() || testOnPostgres {
		total = 20000
	}
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}}`)

	type key struct{ pk, id string }
	var (
		logMu    sync.Mutex
		upserted = map[int]key{} // v → item
		deleted  = map[key]int{}
	)
	var done atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for n := range total / writers {
				k := key{fmt.Sprintf("p%d", rng.IntN(partitions)), fmt.Sprintf("i%d", rng.IntN(idsPer))}
				if rng.IntN(5) == 0 {
					_, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: k.id, PartitionKey: StringKey(k.pk), HasPartitionKey: true})
					if StatusOf(err) == 404 {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					logMu.Lock()
					deleted[k]++
					logMu.Unlock()
					continue
				}
				v := w*1_000_000 + n
				body := fmt.Sprintf(`{"id":%q,"pk":%q,"v":%d}`, k.id, k.pk, v)
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
					t.Error(err)
					return
				}
				logMu.Lock()
				upserted[v] = k
				logMu.Unlock()
			}
		}()
	}

	latest := map[key]feedDoc{}
	var latestOutOfOrder int
	var readers sync.WaitGroup
	readers.Add(2)
	go followChangeFeed(&readers, t, e, LatestVersion, &done, func(doc []byte) {
		var d feedDoc
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Error(err)
			return
		}
		k := key{d.PK, d.ID}
		if prev, ok := latest[k]; ok && prev.LSN >= d.LSN {
			latestOutOfOrder++
		}
		latest[k] = d
	})
	var versions []avadDoc
	go followChangeFeed(&readers, t, e, AllVersionsAndDeletes, &done, func(doc []byte) {
		var d avadDoc
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Error(err)
			return
		}
		versions = append(versions, d)
	})
	wg.Wait()
	writeTime := time.Since(start)
	done.Store(true)
	readers.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d writes (%d upserts, %d deletes) in %v; %d change records", total, len(upserted), sumValues(deleted), writeTime, len(versions))

	// Latest version: the reader's view is the final state.
	final := map[key]int{}
	feed := &FeedRequest{Database: "db", Container: "c", MaxItems: 1000}
	for {
		res, err := e.ReadFeed(ctx, feed)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range res.Items {
			var d feedDoc
			json.Unmarshal(doc, &d)
			final[key{d.PK, d.ID}] = d.V
		}
		if res.Continuation == "" {
			break
		}
		feed.Continuation = res.Continuation
	}
	if latestOutOfOrder > 0 {
		t.Errorf("the latest-version reader saw %d items go back in sequence", latestOutOfOrder)
	}
	for k, v := range final {
		got, ok := latest[k]
		switch {
		case !ok:
			t.Errorf("latest version: %v (v %d) never reported", k, v)
		case got.V != v:
			t.Errorf("latest version: %v reported at v %d, final v %d", k, got.V, v)
		}
	}
	for k, d := range latest {
		if _, ok := final[k]; !ok && deleted[k] == 0 {
			t.Errorf("latest version: %v (v %d) reported but neither stored nor deleted", k, d.V)
		}
		if upserted[d.V] != k {
			t.Errorf("latest version: %v reported with v %d that was never written to it", k, d.V)
		}
	}

	// All versions and deletes: the write log, once each, valid per item.
	seen := map[int]bool{}
	dels := map[key]int{}
	exists := map[key]bool{}
	var lastLSN uint64
	for _, r := range versions {
		if r.Metadata.LSN < lastLSN {
			t.Fatalf("all versions: lsn %d after %d", r.Metadata.LSN, lastLSN)
		}
		lastLSN = r.Metadata.LSN
		switch r.Metadata.OperationType {
		case "create", "replace":
			k := key{r.Current.PK, r.Current.ID}
			if seen[r.Current.V] {
				t.Errorf("all versions: v %d reported twice", r.Current.V)
			}
			seen[r.Current.V] = true
			if want := map[bool]string{false: "create", true: "replace"}[exists[k]]; r.Metadata.OperationType != want {
				t.Errorf("all versions: %v v %d is a %s, want %s", k, r.Current.V, r.Metadata.OperationType, want)
			}
			exists[k] = true
		case "delete":
			k := key{r.Metadata.PartitionKey["pk"], r.Metadata.ID}
			if !exists[k] {
				t.Errorf("all versions: delete of %v, which did not exist", k)
			}
			exists[k] = false
			dels[k]++
		default:
			t.Errorf("all versions: operation %q", r.Metadata.OperationType)
		}
	}
	for v, k := range upserted {
		if !seen[v] {
			t.Errorf("all versions: the write of v %d to %v was skipped", v, k)
		}
	}
	if len(seen) != len(upserted) {
		t.Errorf("all versions: %d writes reported, %d made", len(seen), len(upserted))
	}
	for k, n := range deleted {
		if dels[k] != n {
			t.Errorf("all versions: %v deleted %d times, reported %d", k, n, dels[k])
		}
	}
	for k, ok := range exists {
		if _, stored := final[k]; ok != stored {
			t.Errorf("all versions: replaying the log leaves %v existing = %v, stored = %v", k, ok, stored)
		}
	}
}

// followChangeFeed reads change feed pages from the beginning, following
// continuations, until done is set and the feed has answered 304 after that.
func followChangeFeed(wg *sync.WaitGroup, t *testing.T, e *Engine, mode ChangeFeedMode, done *atomic.Bool, each func(doc []byte)) {
	ctx := t.Context()
	defer wg.Done()
	req := &ChangeFeedRequest{Database: "db", Container: "c", Mode: mode, MaxItems: 1000}
	for {
		finished := done.Load()
		res, err := e.ReadChangeFeed(ctx, req)
		if err != nil {
			t.Error(err)
			return
		}
		for _, d := range res.Items {
			each(d)
		}
		req.Continuation = res.ETag
		if res.NotModified {
			if finished {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func sumValues[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
