package engine

import (
	"strconv"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// BenchmarkOps is the yardstick of the engine's everyday operations, one
// writer, on Pebble and on memory storage: create, point read, replace and
// one page of a single-partition query. A change to the engine's structure
// is measured against it before and after (benchstat).
func BenchmarkOps(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"pebble", func(b *testing.B) storage.Store {
			s, err := pebble.Open(b.TempDir(), pebble.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"memory", func(b *testing.B) storage.Store { return memory.New() }},
	}
	for _, st := range stores {
		b.Run(st.name+"/create", func(b *testing.B) {
			ctx := b.Context()
			e := openTestEngine(b, st.open(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.CreateItem(ctx, opsItem(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/read", func(b *testing.B) {
			ctx := b.Context()
			e := opsEngine(b, st.open(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.ReadItem(ctx, opsRef(i%opsItems)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/replace", func(b *testing.B) {
			ctx := b.Context()
			e := opsEngine(b, st.open(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.ReplaceItem(ctx, opsItem(i%opsItems)); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A replace of the server benchmark's kind: the item of
		// cmd/orrery's benchDoc with one property, n, changed (and
		// nested.x with it).
		b.Run(st.name+"/replace-one-property", func(b *testing.B) {
			ctx := b.Context()
			e := opsEngine(b, st.open(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := strconv.Itoa(i % opsItems)
				body := []byte(benchDoc(id, i))
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: id, Body: body, PartitionKey: StringKey("p1"), HasPartitionKey: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/query-page", func(b *testing.B) {
			ctx := b.Context()
			e := opsEngine(b, st.open(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c",
					Query: "SELECT * FROM c WHERE c.n >= 10", PartitionKey: StringKey(opsPK(i)), HasPartitionKey: true, MaxItems: 20})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Items) == 0 {
					b.Fatal("the query page is empty")
				}
			}
		})
	}
}

// opsItems is how many items the read, replace and query benchmarks find
// in their container, over opsPartitions logical partitions.
const (
	opsItems      = 1000
	opsPartitions = 10
)

func opsPK(i int) string { return "p" + strconv.Itoa(i%opsPartitions) }

func opsItem(i int) *ItemRequest {
	id, pk := strconv.Itoa(i), opsPK(i)
	body := []byte(`{"id":"` + id + `","pk":"` + pk + `","n":` + strconv.Itoa(i/opsPartitions) + `,"payload":"` + benchPayload[:200] + `"}`)
	return &ItemRequest{Database: "db", Container: "c", ID: id, Body: body, PartitionKey: StringKey(pk), HasPartitionKey: true}
}

func opsRef(i int) *ItemRequest {
	return &ItemRequest{Database: "db", Container: "c", ID: strconv.Itoa(i), PartitionKey: StringKey(opsPK(i)), HasPartitionKey: true}
}

// opsEngine is an engine whose container holds opsItems items.
func opsEngine(b *testing.B, s storage.Store) *Engine {
	e := openTestEngine(b, s)
	for i := 0; i < opsItems; i++ {
		if _, err := e.CreateItem(b.Context(), opsItem(i)); err != nil {
			b.Fatal(err)
		}
	}
	return e
}
