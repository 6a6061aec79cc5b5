package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

func newTestEngine(t *testing.T) *engine.Engine {
	ctx := t.Context()
	t.Helper()
	s := engine.NewTestStore(t)
	e, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); s.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},"changeFeedPolicy":{"retentionDuration":60}}`), nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func pkOf(t *testing.T, v string) engine.PartitionKey {
	t.Helper()
	pk, err := engine.ParsePartitionKeyHeader(`["` + v + `"]`)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func TestExecuteBatch(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name     string
		atomic   bool
		ops      string
		statuses []int
		present  []string // ids in partition a afterwards
		absent   []string
	}{
		{"reads see earlier writes", true,
			`[{"operationType":"Create","resourceBody":{"id":"n","pk":"a","v":1}},{"operationType":"Patch","id":"n","resourceBody":{"operations":[{"op":"incr","path":"/v","value":1}]}},{"operationType":"Read","id":"n"}]`,
			[]int{201, 200, 200}, []string{"seed", "n"}, nil},
		{"a conflict rolls everything back", true,
			`[{"operationType":"Create","resourceBody":{"id":"n","pk":"a"}},{"operationType":"Delete","id":"seed"},{"operationType":"Create","resourceBody":{"id":"n","pk":"a"}}]`,
			[]int{424, 424, 409}, []string{"seed"}, []string{"n"}},
		{"an item of another partition fails the batch", true,
			`[{"operationType":"Create","resourceBody":{"id":"o1","pk":"a"}},{"operationType":"Create","resourceBody":{"id":"o2","pk":"b"}}]`,
			[]int{424, 400}, []string{"seed"}, []string{"o1"}},
		{"an operation naming another partition fails the batch", true,
			`[{"operationType":"Read","id":"seed"},{"operationType":"Read","id":"seed","partitionKey":"[\"b\"]"}]`,
			[]int{424, 400}, []string{"seed"}, nil},
		{"a malformed operation fails the batch", true,
			`[{"operationType":"Upsert","resourceBody":{"id":"u","pk":"a"}},{"operationType":"Patch","id":"seed","resourceBody":{"operations":[]}}]`,
			[]int{424, 400}, []string{"seed"}, []string{"u"}},
		{"a read of an item the batch deleted is a 404", true,
			`[{"operationType":"Delete","id":"seed"},{"operationType":"Read","id":"seed"}]`,
			[]int{424, 404}, []string{"seed"}, nil},
		{"bulk runs each operation alone", false,
			`[{"operationType":"Create","resourceBody":{"id":"n","pk":"a"}},{"operationType":"Create","resourceBody":{"id":"seed","pk":"a"}},{"operationType":"Delete","id":"seed"}]`,
			[]int{201, 409, 204}, []string{"n"}, []string{"seed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t)
			a := pkOf(t, "a")
			if _, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: a, HasPartitionKey: true, Body: []byte(`{"id":"seed","pk":"a"}`)}); err != nil {
				t.Fatal(err)
			}
			ops, err := engine.ParseBatch([]byte(tc.ops))
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: a, HasPartitionKey: true, Atomic: tc.atomic, Operations: ops})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			failed := false
			for _, r := range res.Results {
				got = append(got, r.Status)
				failed = failed || r.Status >= 400
			}
			if !slices.Equal(got, tc.statuses) || res.Failed != failed {
				t.Fatalf("statuses %v failed %v, want %v", got, res.Failed, tc.statuses)
			}
			for _, id := range tc.present {
				if _, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: a, HasPartitionKey: true}); err != nil {
					t.Errorf("item %s: %v", id, err)
				}
			}
			for _, id := range tc.absent {
				if _, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: a, HasPartitionKey: true}); engine.StatusOf(err) != 404 {
					t.Errorf("item %s should be absent: %v", id, err)
				}
			}
		})
	}
}

func TestExecuteBatchReadSeesPatch(t *testing.T) {
	ctx := t.Context()
	e := newTestEngine(t)
	a := pkOf(t, "a")
	ops, _ := engine.ParseBatch([]byte(`[{"operationType":"Create","resourceBody":{"id":"n","pk":"a","v":1}},{"operationType":"Patch","id":"n","resourceBody":{"operations":[{"op":"incr","path":"/v","value":41}]}},{"operationType":"Read","id":"n"}]`))
	res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: a, HasPartitionKey: true, Atomic: true, Operations: ops})
	if err != nil || res.Failed {
		t.Fatalf("%v %+v", err, res)
	}
	var d struct{ V int }
	json.Unmarshal(res.Results[2].Body, &d)
	if d.V != 42 {
		t.Errorf("read in the batch: v = %d, want 42 (%s)", d.V, res.Results[2].Body)
	}
	if res.Results[1].ETag != res.Results[2].ETag || !strings.HasPrefix(res.Results[2].ETag, `"`) {
		t.Errorf("etags: patch %s, read %s", res.Results[1].ETag, res.Results[2].ETag)
	}
}

func TestPatchItem(t *testing.T) {
	ctx := t.Context()
	e := newTestEngine(t)
	a := pkOf(t, "a")
	created, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: a, HasPartitionKey: true, Body: []byte(`{"id":"p","pk":"a","stock":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(body, ifMatch string) (*engine.ItemResult, error) {
		return e.PatchItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "p", PartitionKey: a, HasPartitionKey: true, Body: []byte(body), IfMatch: ifMatch})
	}
	tests := []struct {
		name, body, ifMatch string
		status              int
		message             string
	}{
		{"false condition", `{"condition":"FROM c WHERE c.stock >= 10","operations":[{"op":"incr","path":"/stock","value":-10}]}`, "", 412, "One of the specified pre-condition is not met"},
		{"stale If-Match", `[{"op":"set","path":"/x","value":1}]`, `"stale"`, 412, "E-tag mismatch detected"},
		{"an operation that cannot apply", `[{"op":"set","path":"/x","value":1},{"op":"remove","path":"/nope"}]`, "", 400, "For Operation(2): Node(/nope) to be removed is absent."},
		{"a patched ttl is validated", `[{"op":"set","path":"/ttl","value":-5}]`, "", 400, "The ttl value -5 is invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := patch(tc.body, tc.ifMatch)
			ce, ok := engine.AsError(err)
			if !ok || ce.Status != tc.status || !strings.Contains(ce.Message, tc.message) {
				t.Fatalf("error %v, want %d %q", err, tc.status, tc.message)
			}
			cur, _ := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "p", PartitionKey: a, HasPartitionKey: true})
			if cur.ETag != created.ETag {
				t.Errorf("a failed patch changed the item: %s", cur.Body)
			}
		})
	}
	res, err := patch(`{"condition":"FROM c WHERE c.stock >= 5","operations":[{"op":"incr","path":"/stock","value":-5}]}`, created.ETag)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Stock int }
	json.Unmarshal(res.Body, &d)
	if res.Status != 200 || d.Stock != 2 || res.ETag == created.ETag {
		t.Errorf("patch: status %d stock %d etag %s", res.Status, d.Stock, res.ETag)
	}
	if _, err := e.PatchItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "gone", PartitionKey: a, HasPartitionKey: true, Body: []byte(`[{"op":"set","path":"/x","value":1}]`)}); engine.StatusOf(err) != 404 {
		t.Errorf("patch of a missing item: %v, want 404", err)
	}
}

// TestBatchChangeFeed checks that a committed batch's writes reach the change
// feed, each item once in its latest version and every version in the
// all-versions feed, and that a failed batch's writes never do.
func TestBatchChangeFeed(t *testing.T) {
	ctx := t.Context()
	e := newTestEngine(t)
	a := pkOf(t, "a")
	run := func(body string) *engine.BatchResult {
		ops, err := engine.ParseBatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: a, HasPartitionKey: true, Atomic: true, Operations: ops})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(`[{"operationType":"Create","resourceBody":{"id":"x","pk":"a","n":1}},{"operationType":"Create","resourceBody":{"id":"y","pk":"a"}},{"operationType":"Patch","id":"x","resourceBody":{"operations":[{"op":"incr","path":"/n","value":1}]}},{"operationType":"Delete","id":"y"},{"operationType":"Upsert","resourceBody":{"id":"z","pk":"a"}}]`); res.Failed {
		t.Fatalf("batch failed: %+v", res.Results)
	}
	if res := run(`[{"operationType":"Create","resourceBody":{"id":"w","pk":"a"}},{"operationType":"Create","resourceBody":{"id":"z","pk":"a"}}]`); !res.Failed {
		t.Fatal("the second batch should fail on z")
	}
	feed := func(mode engine.ChangeFeedMode) []string {
		res, err := e.ReadChangeFeed(ctx, &engine.ChangeFeedRequest{Database: "db", Container: "c", Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, raw := range res.Items {
			var d struct {
				ID       string
				N        int
				Metadata struct{ OperationType string }
			}
			json.Unmarshal(raw, &d)
			if mode == engine.AllVersionsAndDeletes {
				got = append(got, d.Metadata.OperationType)
			} else {
				got = append(got, d.ID+"="+strings.Repeat("+", d.N))
			}
		}
		return got
	}
	if got, want := feed(engine.LatestVersion), []string{"x=++", "z="}; !slices.Equal(got, want) {
		t.Errorf("latest version feed %v, want %v", got, want)
	}
	if got, want := feed(engine.AllVersionsAndDeletes), []string{"create", "create", "replace", "delete", "create"}; !slices.Equal(got, want) {
		t.Errorf("all versions feed %v, want %v", got, want)
	}
}
