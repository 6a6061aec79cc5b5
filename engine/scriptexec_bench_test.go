package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// create100 is a stored procedure that creates 100 items in its partition,
// named base-0 … base-99.
const create100 = `function create100(base) {
	var coll = getContext().getCollection(), link = coll.getSelfLink();
	for (var i = 0; i < 100; i++) {
		if (!coll.createDocument(link, {id: base + "-" + i, pk: "p", v: i})) throw new Error("not accepted");
	}
	getContext().getResponse().setBody(100);
}`

// BenchmarkHundredCreates compares the two ways of writing 100 items of one
// partition in one transaction, without HTTP: a stored procedure that calls
// createDocument 100 times, and a transactional batch of 100 creates. One
// iteration is 100 items; on memory storage and on Pebble with synced commits.
func BenchmarkHundredCreates(b *testing.B) {
	ctx := b.Context()
	for _, storage := range []struct {
		name    string
		durable bool
	}{{"memory", false}, {"pebble", true}} {
		b.Run("sproc/"+storage.name, func(b *testing.B) {
			e := benchEngine(b, storage.durable)
			if _, err := e.CreateScript(ctx, "db", "c", engine.StoredProcedures, []byte(fmt.Sprintf(`{"id":"create100","body":%q}`, create100))); err != nil {
				b.Fatal(err)
			}
			pk, _ := engine.ParsePartitionKeyHeader(`["p"]`)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := e.ExecuteStoredProcedure(ctx, &engine.ExecuteRequest{Database: "db", Container: "c", ID: "create100",
					PartitionKey: pk, HasPartitionKey: true, Args: []json.RawMessage{fmt.Appendf(nil, `"r%d"`, i)}})
				if err != nil || string(res.Body) != "100" {
					b.Fatalf("execute: %v %+v", err, res)
				}
			}
		})
		b.Run("batch/"+storage.name, func(b *testing.B) {
			e := benchEngine(b, storage.durable)
			pk, _ := engine.ParsePartitionKeyHeader(`["p"]`)
			ops := make([]string, 100)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range ops {
					ops[k] = fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"r%d-%d","pk":"p","v":%d}}`, i, k, k)
				}
				parsed, err := engine.ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
				if err != nil {
					b.Fatal(err)
				}
				res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: pk, HasPartitionKey: true, Atomic: true, Operations: parsed})
				if err != nil || res.Failed {
					b.Fatalf("batch: %v %+v", err, res)
				}
			}
		})
	}
}

// BenchmarkBulkUpserts measures a bulk (non-atomic) request of 100 upserts
// spread over 10 logical partitions, without HTTP, on Pebble with synced
// commits: each operation is a transaction of its own, so its cost is the
// commits' fsyncs, which partitions run side by side share.
func BenchmarkBulkUpserts(b *testing.B) {
	ctx := b.Context()
	e := benchEngine(b, true)
	ops := make([]string, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range ops {
			ops[k] = fmt.Sprintf(`{"operationType":"Upsert","partitionKey":"[\"p%d\"]","resourceBody":{"id":"r%d","pk":"p%d","v":%d}}`, k%10, k, k%10, i)
		}
		parsed, err := engine.ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
		if err != nil {
			b.Fatal(err)
		}
		res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", Operations: parsed})
		if err != nil || res.Failed {
			b.Fatalf("bulk: %v %+v", err, res)
		}
	}
}
