package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// TestBulkRunsEachPartitionsOperationsInOrder: a bulk request's logical
// partitions may run side by side, but each one's operations run in the
// request's order: a chain of create, patches, delete and create again on
// the same item in each of 10 partitions ends as it would one by one, and
// every result is at its operation's place.
func TestBulkRunsEachPartitionsOperationsInOrder(t *testing.T) {
	ctx := t.Context()
	e := newTestEngine(t)
	const partitions, patches = 10, 5
	var ops []string
	var want []int
	// Interleave the partitions, as an SDK's bulk request may.
	step := func(p int, s string, status int) {
		ops = append(ops, strings.ReplaceAll(s, "PK", fmt.Sprintf("p%d", p)))
		want = append(want, status)
	}
	for p := range partitions {
		step(p, `{"operationType":"Create","partitionKey":"[\"PK\"]","resourceBody":{"id":"x","pk":"PK","n":0}}`, 201)
	}
	for range patches {
		for p := range partitions {
			step(p, `{"operationType":"Patch","id":"x","partitionKey":"[\"PK\"]","resourceBody":{"operations":[{"op":"incr","path":"/n","value":1}]}}`, 200)
		}
	}
	for p := range partitions {
		step(p, `{"operationType":"Read","id":"x","partitionKey":"[\"PK\"]"}`, 200)
		step(p, `{"operationType":"Delete","id":"x","partitionKey":"[\"PK\"]"}`, 204)
		step(p, `{"operationType":"Create","partitionKey":"[\"PK\"]","resourceBody":{"id":"x","pk":"PK","n":100}}`, 201)
		step(p, `{"operationType":"Create","partitionKey":"[\"PK\"]","resourceBody":{"id":"x","pk":"PK"}}`, 409)
	}
	parsed, err := engine.ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", Operations: parsed})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed {
		t.Fatal("a bulk request with 409s is not marked failed")
	}
	for i, r := range res.Results {
		if r.Status != want[i] {
			t.Fatalf("operation %d (%s): status %d, want %d (%s)", i, ops[i], r.Status, want[i], r.Message)
		}
		if want[i] == 200 && strings.Contains(ops[i], `"Read"`) && !strings.Contains(string(r.Body), fmt.Sprintf(`"n":%d`, patches)) {
			t.Fatalf("operation %d read %s, want n %d: the patches before it had not all run", i, r.Body, patches)
		}
	}
	for p := range partitions {
		got, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "x", PartitionKey: pkOf(t, fmt.Sprintf("p%d", p)), HasPartitionKey: true})
		if err != nil || !strings.Contains(string(got.Body), `"n":100`) {
			t.Fatalf("x in p%d after the bulk request: %v, want n 100", p, err)
		}
	}
}
