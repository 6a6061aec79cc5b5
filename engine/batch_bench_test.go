package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// Engine-level benchmarks of batch against single creates, without HTTP: on
// memory storage, and on Pebble with synced commits, where one batch is one
// fsync and each single create is one.

func benchEngine(b *testing.B, durable bool) *engine.Engine {
	ctx := b.Context()
	var s storage.Store = memory.New()
	if durable {
		p, err := pebble.Open(b.TempDir(), pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s = p
	}
	e, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); s.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil); err != nil {
		b.Fatal(err)
	}
	return e
}

func benchEngineCreates(b *testing.B, durable, batched bool) {
	ctx := b.Context()
	e := benchEngine(b, durable)
	pk, _ := engine.ParsePartitionKeyHeader(`["p"]`)
	b.ResetTimer()
	for i := 0; i < b.N; {
		if !batched {
			if _, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: pk, HasPartitionKey: true,
				Body: fmt.Appendf(nil, `{"id":"i%d","pk":"p","v":%d}`, i, i)}); err != nil {
				b.Fatal(err)
			}
			i++
			continue
		}
		var ops []string
		for k := 0; k < 100 && i < b.N; k++ {
			ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"i%d","pk":"p","v":%d}}`, i, i))
			i++
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
}

func BenchmarkEngineCreateSingleMemory(b *testing.B)             { benchEngineCreates(b, false, false) }
func BenchmarkEngineCreateInBatchesOfHundredMemory(b *testing.B) { benchEngineCreates(b, false, true) }
func BenchmarkEngineCreateSinglePebble(b *testing.B)             { benchEngineCreates(b, true, false) }
func BenchmarkEngineCreateInBatchesOfHundredPebble(b *testing.B) { benchEngineCreates(b, true, true) }
