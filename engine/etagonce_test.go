package engine

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/orrery-db/orrery/storage/memory"
)

// TestAWritesETagIsTheOneItsRecordAnswersWith: the ETag a write answers
// with (formatted once, as put writes the record) is its body's "_etag",
// the ETag a read of the record then formats from its fields, and new on
// every write: over random creates, upserts, replaces, patches and atomic
// batches writing one item several times (the write number in the ETag).
func TestAWritesETagIsTheOneItsRecordAnswersWith(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, memory.New())
	r := rand.New(rand.NewPCG(42, 3))
	seen := map[string]bool{}
	check := func(what, id, etag string, body []byte) {
		t.Helper()
		var doc struct {
			ETag string `json:"_etag"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s %s: body %s: %v", what, id, body, err)
		}
		if doc.ETag != etag || len(etag) != etagLen {
			t.Fatalf("%s %s: answered ETag %s, body's _etag %s", what, id, etag, doc.ETag)
		}
		if seen[etag] {
			t.Fatalf("%s %s: ETag %s answered before", what, id, etag)
		}
		seen[etag] = true
	}
	ref := func(id string) *ItemRequest {
		return &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey("p"), HasPartitionKey: true}
	}
	body := func(id string, n int) []byte {
		return []byte(`{"id":"` + id + `","pk":"p","n":` + strconv.Itoa(n) + `}`)
	}
	patch := []byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`)
	parsed, err := ParsePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for i := range 600 {
		id := strconv.Itoa(r.IntN(8))
		var last string
		switch k := r.IntN(4); {
		case k == 0 && !exists[id]:
			req := ref(id)
			req.Body = body(id, i)
			res, err := e.CreateItem(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			check("create", id, res.ETag, res.Body)
			last = res.ETag
		case k == 1 || !exists[id]:
			req := ref(id)
			req.Body = body(id, i)
			res, err := e.UpsertItem(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			check("upsert", id, res.ETag, res.Body)
			last = res.ETag
		case k == 2:
			req := ref(id)
			req.Body = body(id, i)
			res, err := e.ReplaceItem(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			check("replace", id, res.ETag, res.Body)
			last = res.ETag
		default:
			ops := []BatchOperation{{Type: BatchUpsert, Body: body(id, i)}}
			for range r.IntN(4) {
				if r.IntN(2) == 0 {
					ops = append(ops, BatchOperation{Type: BatchPatch, ID: id, Body: patch, patch: parsed})
				} else {
					ops = append(ops, BatchOperation{Type: BatchUpsert, Body: body(id, i)})
				}
			}
			res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true, Operations: ops, Atomic: true})
			if err != nil || res.Failed {
				t.Fatalf("batch: %v %+v", err, res)
			}
			for _, o := range res.Results {
				check("batch", id, o.ETag, o.Body)
				last = o.ETag
			}
		}
		exists[id] = true
		if r.IntN(3) == 0 {
			req := ref(id)
			req.Body = patch
			res, err := e.PatchItem(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			check("patch", id, res.ETag, res.Body)
			last = res.ETag
		}
		got, err := e.ReadItem(ctx, ref(id))
		if err != nil {
			t.Fatal(err)
		}
		if got.ETag != last {
			t.Fatalf("%s: read answers ETag %s, the last write %s", id, got.ETag, last)
		}
	}
}
