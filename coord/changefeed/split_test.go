package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
)

// splitService imitates what Azure Cosmos DB does to a container's change
// feed when a physical range splits, for the unit test of the processor's
// split path (the Orrery server gives every container one range): range "0"
// covers ["", "FF"); after split() it answers 410 with substatus 1002
// (partition key range gone), and the partition key ranges feed lists
// children "1" ["", "7F") and "2" ["7F", "FF") with parents ["0"]. Every
// change has a global LSN; a child's feed continues from a parent's ETag.
type splitService struct {
	mu      sync.Mutex
	lsn     int
	items   []fakeItem
	split   bool
	gone    int // 410 answers given
	pkReads int // partition key range reads after the split
}

type fakeItem struct {
	lsn int
	pk  string
	doc []byte
}

// childOf assigns a partition key to a child range.
func childOf(pk string) string {
	if n, _ := strconv.Atoi(strings.TrimPrefix(pk, "pk")); n%2 == 0 {
		return "1"
	}
	return "2"
}

func (f *splitService) add(pk string, seq int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lsn++
	doc, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%04d", pk, seq), "pk": pk, "seq": seq, "_lsn": f.lsn})
	f.items = append(f.items, fakeItem{lsn: f.lsn, pk: pk, doc: doc})
}

func (f *splitService) doSplit() {
	f.mu.Lock()
	f.split = true
	f.mu.Unlock()
}

func (f *splitService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-ms-session-token", "0:-1#"+strconv.Itoa(f.lsn))
	path := strings.Trim(r.URL.Path, "/")
	switch {
	case path == "":
		loc := []map[string]any{{"name": "South Central US", "databaseAccountEndpoint": "http://" + r.Host + "/"}}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "fake", "_rid": "fake", "writableLocations": loc,
			"readableLocations": loc, "userConsistencyPolicy": map[string]any{"defaultConsistencyLevel": "Session"}})
	case path == "dbs/db/colls/c":
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "_rid": "bf8uALgoqxk=", "_etag": `"1"`,
			"partitionKey": map[string]any{"paths": []string{"/pk"}, "kind": "Hash", "version": 2}})
	case path == "dbs/db/colls/c/pkranges":
		version := `"1"`
		ranges := []map[string]any{{"id": "0", "minInclusive": "", "maxExclusive": "FF", "parents": []string{}}}
		if f.split {
			f.pkReads++
			version = `"2"`
			ranges = []map[string]any{
				{"id": "1", "minInclusive": "", "maxExclusive": "7F", "parents": []string{"0"}},
				{"id": "2", "minInclusive": "7F", "maxExclusive": "FF", "parents": []string{"0"}}}
		}
		if r.Header.Get("If-None-Match") == version {
			w.Header().Set("etag", version)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("etag", version)
		_ = json.NewEncoder(w).Encode(map[string]any{"_rid": "bf8uALgoqxk=", "PartitionKeyRanges": ranges, "_count": len(ranges)})
	case path == "dbs/db/colls/c/docs" && r.Header.Get("A-IM") != "":
		id := r.Header.Get("x-ms-documentdb-partitionkeyrangeid")
		if (f.split && id == "0") || (!f.split && id != "0") {
			f.gone++
			w.Header().Set("x-ms-substatus", "1002")
			w.WriteHeader(http.StatusGone)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": "Gone", "message": "The partition key range is gone."})
			return
		}
		from := 0
		if inm := strings.Trim(r.Header.Get("If-None-Match"), `"`); inm != "" {
			from, _ = strconv.Atoi(inm)
		}
		limit, _ := strconv.Atoi(r.Header.Get("x-ms-max-item-count"))
		if limit <= 0 {
			limit = 100
		}
		var docs []json.RawMessage
		last := from
		for _, it := range f.items {
			if it.lsn > from && (id == "0" || childOf(it.pk) == id) && len(docs) < limit {
				docs = append(docs, it.doc)
				last = it.lsn
			}
		}
		if len(docs) == 0 {
			w.Header().Set("etag", `"`+strconv.Itoa(max(from, f.lsn))+`"`)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("etag", `"`+strconv.Itoa(last)+`"`)
		_ = json.NewEncoder(w).Encode(map[string]any{"_rid": "bf8uALgoqxk=", "Documents": docs, "_count": len(docs)})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": "NotFound", "message": "not imitated: " + r.Method + " " + path})
	}
}

// TestSplitReplacesTheLeaseByItsChildren splits the monitored range while
// the processor reads it: the parent's lease becomes one lease per child,
// each continuing where the parent was, and every change is delivered, in
// order per partition key. The leases are on the real server.
func TestSplitReplacesTheLeaseByItsChildren(t *testing.T) {
	fake := &splitService{}
	ts := httptest.NewServer(fake)
	defer ts.Close()
	cred, _ := azcosmos.NewKeyCredential(cosmostest.EmulatorKey)
	fc, err := azcosmos.NewClientWithKey(ts.URL+"/", cred, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	monitored, _ := fc.NewContainer("db", "c")
	f := newFixture(t, 0)
	f.monitored, f.monitoredClient = monitored, fc

	const pks = 6
	for s := range 10 {
		for k := range pks {
			fake.add(fmt.Sprintf("pk%02d", k), s)
		}
	}
	rec := newRecorder()
	var batchMu sync.Mutex
	batches := 0
	var once sync.Once
	h := func(ctx context.Context, b Batch) error {
		batchMu.Lock()
		batches++
		third := batches == 3
		batchMu.Unlock()
		if third {
			// The range splits after two pages, with changes of every key
			// still unread, and more are written to both children.
			once.Do(func() {
				fake.doSplit()
				go func() {
					for s := 10; s < 20; s++ {
						for k := range pks {
							fake.add(fmt.Sprintf("pk%02d", k), s)
						}
					}
				}()
			})
		}
		return rec.handler(ctx, b)
	}
	f.startWorker("w0", h, func(o *Options) { o.MaxItems = 7 })
	rec.await(t, pks*20, 60*time.Second)

	fake.mu.Lock()
	gone, pkReads := fake.gone, fake.pkReads
	fake.mu.Unlock()
	if gone == 0 || pkReads == 0 {
		t.Fatalf("the split was not exercised: %d 410 answers, %d range reads after it", gone, pkReads)
	}
	st := &store{c: f.leases, prefix: f.prefix("proc")}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := st.list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var tokens []string
		for _, l := range all {
			tokens = append(tokens, l.LeaseToken+"@"+l.Owner)
		}
		slices.Sort(tokens)
		if slices.Equal(tokens, []string{"-7F@w0", "7F-FF@w0"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases after the split: %v, want the children -7F and 7F-FF owned by w0", tokens)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
