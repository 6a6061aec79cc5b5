package engine_test

import (
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// TestConfinedBatch: a request confined to one logical partition (its
// credential reaches only that one) runs no operation that resolves to
// another, whether the operation names its partition key, takes the
// header's, or carries it in its body.
func TestConfinedBatch(t *testing.T) {
	ctx := t.Context()
	e := newTestEngine(t)
	for _, body := range []string{`{"id":"a1","pk":"a"}`, `{"id":"b1","pk":"b","secret":1}`} {
		if _, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := engine.ParseBatch([]byte(`[{"operationType":"Read","id":"b1","partitionKey":"[\"b\"]"},` +
		`{"operationType":"Create","resourceBody":{"id":"b2","pk":"b"}},` +
		`{"operationType":"Delete","id":"b1","partitionKey":"[\"b\"]"},` +
		`{"operationType":"Read","id":"a1","partitionKey":"[\"a\"]"},` +
		`{"operationType":"Upsert","resourceBody":{"id":"a2","pk":"a"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", Operations: ops,
		Confined: true, Partition: pkOf(t, "a")})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{403, 403, 403, 200, 201} {
		if got := res.Results[i].Status; got != want {
			t.Errorf("operation %d: status %d, want %d (%s)", i, got, want, res.Results[i].Message)
		}
	}
	if res.Results[0].Body != nil {
		t.Errorf("a refused read returned %s", res.Results[0].Body)
	}
	if _, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "b1", PartitionKey: pkOf(t, "b"), HasPartitionKey: true}); err != nil {
		t.Errorf("b1 after the confined bulk: %v", err)
	}
	if _, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: "b2", PartitionKey: pkOf(t, "b"), HasPartitionKey: true}); engine.StatusOf(err) != 404 {
		t.Errorf("b2 after the confined bulk: %v, want 404", err)
	}

	// An atomic batch runs in its header's partition: elsewhere it is
	// refused whole.
	read, _ := engine.ParseBatch([]byte(`[{"operationType":"Read","id":"b1"}]`))
	_, err = e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", Operations: read, Atomic: true,
		PartitionKey: pkOf(t, "b"), HasPartitionKey: true, Confined: true, Partition: pkOf(t, "a")})
	if engine.StatusOf(err) != 403 {
		t.Fatalf("atomic batch outside the partition: %v, want 403", err)
	}
}
