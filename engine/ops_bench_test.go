package engine

import (
	"strconv"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// BenchmarkOps is the yardstick of the engine's everyday operations, one
// writer, on Pebble and on memory storage: create, point read, replace,
// patch and one page of a single-partition query. A change to the
// engine's structure is measured against it before and after (benchstat).
func BenchmarkOps(b *testing.B) {
	stores := []opsStore{
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
		benchOps(b, st, nil)
	}
}

// BenchmarkOpsCounted is BenchmarkOps on memory storage, its engine's
// clock moved one second per operation (each write of an item in a later
// second than the one before, as most are) and without the TTL sweeper,
// for counting instructions per operation under callgrind: what a write
// does no longer depends on the wall clock (the second it falls in
// decides which keys it changes), and runs of one binary agree within
// about 1,500 instructions per op where BenchmarkOps's replace spread
// from 42,000 to 55,000 with the machine's load.
func BenchmarkOpsCounted(b *testing.B) {
	benchOps(b, opsStore{"memory", func(b *testing.B) storage.Store { return memory.New() }}, newTestClock())
}

// opsStore names a store BenchmarkOps opens for each of its benchmarks.
type opsStore struct {
	name string
	open func(b *testing.B) storage.Store
}

// benchOps runs BenchmarkOps's operations on st; with clock, the engine
// runs on it, without a sweeper, and each operation advances it a second.
func benchOps(b *testing.B, st opsStore, clock *testClock) {
	open := func(b *testing.B) *Engine {
		if clock == nil {
			return openTestEngine(b, st.open(b))
		}
		return openTestEngineWith(b, st.open(b), Options{Now: clock.now, SweepInterval: -1})
	}
	tick := func() {
		if clock != nil {
			clock.advance(time.Second)
		}
	}
	fill := func(b *testing.B) *Engine {
		e := open(b)
		for i := 0; i < opsItems; i++ {
			if _, err := e.CreateItem(b.Context(), opsItem(i)); err != nil {
				b.Fatal(err)
			}
			tick()
		}
		return e
	}
	b.Run(st.name+"/create", func(b *testing.B) {
		ctx := b.Context()
		e := open(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.CreateItem(ctx, opsItem(i)); err != nil {
				b.Fatal(err)
			}
			tick()
		}
	})
	b.Run(st.name+"/read", func(b *testing.B) {
		ctx := b.Context()
		e := fill(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.ReadItem(ctx, opsRef(i%opsItems)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(st.name+"/replace", func(b *testing.B) {
		ctx := b.Context()
		e := fill(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.ReplaceItem(ctx, opsItem(i%opsItems)); err != nil {
				b.Fatal(err)
			}
			tick()
		}
	})
	// A replace of the server benchmark's kind: the item of
	// cmd/orrery's benchDoc with one property, n, changed (and
	// nested.x with it).
	b.Run(st.name+"/replace-one-property", func(b *testing.B) {
		ctx := b.Context()
		e := fill(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := strconv.Itoa(i % opsItems)
			body := []byte(benchDoc(id, i))
			if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: id, Body: body, PartitionKey: StringKey("p1"), HasPartitionKey: true}); err != nil {
				b.Fatal(err)
			}
			tick()
		}
	})
	// A patch of the server benchmark's kind: incr of /n (here on
	// every item in turn, not one hot item).
	b.Run(st.name+"/patch", func(b *testing.B) {
		ctx := b.Context()
		e := fill(b)
		body := []byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req := opsRef(i % opsItems)
			req.Body = body
			if _, err := e.PatchItem(ctx, req); err != nil {
				b.Fatal(err)
			}
			tick()
		}
	})
	b.Run(st.name+"/query-page", func(b *testing.B) {
		ctx := b.Context()
		e := fill(b)
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
