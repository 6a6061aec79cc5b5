package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestConcurrentSingleWritesAnswerTheirOwnTransactions: single writes side
// by side, each built in its operation's own room for its transaction
// (aloneRun) and patches decoding their stored item, answer each with its
// own transaction's item: the patches of one hot item answer every count
// from 1 to their number once, each upsert answers its own body, a point
// read (its partition, record and answer in one allocation) the version
// its writer wrote last, and every answer's ETag is the _etag of its body.
func TestConcurrentSingleWritesAnswerTheirOwnTransactions(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(`{"id":"hot","pk":"h","n":0,"o":{"a":[1,2],"b":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	counts := make(chan int, writers*each)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := e.PatchItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "hot", PartitionKey: StringKey("h"), HasPartitionKey: true,
					Body: []byte(`{"operations":[{"op":"incr","path":"/n","value":1},{"op":"set","path":"/o/b","value":"y"}]}`)})
				if err != nil {
					errs <- err
					return
				}
				var got struct {
					N    int    `json:"n"`
					ETag string `json:"_etag"`
				}
				if err := json.Unmarshal(res.Body, &got); err != nil || got.ETag != res.ETag {
					errs <- fmt.Errorf("patch answered %s with ETag %s (%v)", res.Body, res.ETag, err)
					return
				}
				counts <- got.N
				body := fmt.Sprintf(`{"id":"u%d","pk":"w%d","w":%d,"i":%d}`, i%3, w, w, i)
				res, err = e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(body)})
				if err != nil {
					errs <- err
					return
				}
				var up struct {
					W, I int
					ETag string `json:"_etag"`
				}
				if err := json.Unmarshal(res.Body, &up); err != nil || up.W != w || up.I != i || up.ETag != res.ETag {
					errs <- fmt.Errorf("upsert of %s answered %s with ETag %s (%v)", body, res.Body, res.ETag, err)
					return
				}
				// Its writer alone writes the item: a read answers the
				// upsert's version.
				res, err = e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: fmt.Sprintf("u%d", i%3), PartitionKey: StringKey(fmt.Sprintf("w%d", w)), HasPartitionKey: true})
				if err != nil {
					errs <- err
					return
				}
				if err := json.Unmarshal(res.Body, &up); err != nil || up.W != w || up.I != i || up.ETag != res.ETag {
					errs <- fmt.Errorf("a read after the upsert of %s answered %s with ETag %s (%v)", body, res.Body, res.ETag, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(counts)
	for err := range errs {
		t.Fatal(err)
	}
	var got []int
	for n := range counts {
		got = append(got, n)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("the patches answered counts %v, want 1 to %d once each", got, writers*each)
		}
	}
}

// TestBatchRecordsAreEachTheirOwn: a transactional batch whose operations
// read and write several items, the first record it reads and the first
// it writes in the transaction's room and the others apart, answers each
// operation with its own item's version.
func TestBatchRecordsAreEachTheirOwn(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	for _, body := range []string{`{"id":"x","pk":"p","v":1}`, `{"id":"y","pk":"p","v":2}`} {
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	ops := []BatchOperation{
		{Type: BatchUpsert, Body: []byte(`{"id":"x","pk":"p","v":3}`)},
		{Type: BatchReplace, ID: "y", Body: []byte(`{"id":"y","pk":"p","v":4}`)},
		{Type: BatchRead, ID: "x"},
		{Type: BatchRead, ID: "y"},
		{Type: BatchCreate, Body: []byte(`{"id":"z","pk":"p","v":5}`)},
		{Type: BatchPatch, ID: "x", Body: []byte(`[{"op":"incr","path":"/v","value":10}]`)},
		{Type: BatchRead, ID: "x"},
		{Type: BatchRead, ID: "z"},
	}
	for i := range ops {
		if ops[i].Type == BatchPatch {
			p, err := ParsePatch(ops[i].Body)
			if err != nil {
				t.Fatal(err)
			}
			ops[i].patch = p
		}
	}
	res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true, Atomic: true, Operations: ops})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id string
		v  int
	}{{"x", 3}, {"y", 4}, {"x", 3}, {"y", 4}, {"z", 5}, {"x", 13}, {"x", 13}, {"z", 5}}
	for i, r := range res.Results {
		var got struct {
			ID   string
			V    int
			ETag string `json:"_etag"`
		}
		if err := json.Unmarshal(r.Body, &got); err != nil || got.ID != want[i].id || got.V != want[i].v || got.ETag != r.ETag {
			t.Errorf("operation %d (%s) answered %d %s with ETag %s, want %s at %d", i, ops[i].Type, r.Status, r.Body, r.ETag, want[i].id, want[i].v)
		}
	}
}
