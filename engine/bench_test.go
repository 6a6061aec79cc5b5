package engine

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
)

func benchEngine(b *testing.B) *Engine {
	b.Helper()
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return openTestEngine(b, store)
}

func openTestEngine(tb testing.TB, store storage.Store) *Engine {
	tb.Helper()
	return openTestEngineWith(tb, store, Options{})
}

// openTestEngineWith is openTestEngine with opts.
func openTestEngineWith(tb testing.TB, store storage.Store, opts Options) *Engine {
	ctx := tb.Context()
	tb.Helper()
	e, err := Open(ctx, store, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
		tb.Fatal(err)
	}
	return e
}

// benchPayload is the 1 KB filler of benchmark items.
var benchPayload = strings.Repeat("x", 1000)

// benchBody builds a 1 KB item cheaply, so the benchmark measures the engine.
func benchBody(id, pk string) []byte {
	return []byte(`{"id":"` + id + `","pk":"` + pk + `","payload":"` + benchPayload + `"}`)
}

func benchCreate(b *testing.B, writers int) {
	ctx := b.Context()
	e := benchEngine(b)
	var n atomic.Int64
	b.SetParallelism((writers + 1) / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			pk := fmt.Sprintf("p%d", i%int64(writers))
			body := benchBody(strconv.FormatInt(i, 10), pk)
			if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: body, PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreate1Writer is the single-writer rate of durable creates.
func BenchmarkCreate1Writer(b *testing.B) {
	ctx := b.Context()
	e := benchEngine(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := benchBody(strconv.Itoa(i), "p")
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: body, PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate32Writers is 32 concurrent writers into 32 partitions.
func BenchmarkCreate32Writers(b *testing.B) { benchCreate(b, 32) }

// BenchmarkReplaceHotItem has 32 writers replace one item: the hot
// partition case, where writes of one partition follow each other.
func BenchmarkReplaceHotItem(b *testing.B) {
	ctx := b.Context()
	e := benchEngine(b)
	body := []byte(fmt.Sprintf(`{"id":"hot","pk":"p","payload":%q}`, bytes.Repeat([]byte("x"), 1000)))
	if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: body}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.ReplaceItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "hot", Body: body, PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
