package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/pebble"
)

// pkDeleteBenchItems is how many 1 KB items the deleted partition holds.
const pkDeleteBenchItems = 2000

func fillPartition(b *testing.B, e *Engine, pk string, n int) {
	ctx := b.Context()
	b.Helper()
	for i := 0; i < n; i += 100 {
		ops := make([]string, 0, 100)
		for k := i; k < min(i+100, n); k++ {
			ops = append(ops, `{"operationType":"Create","resourceBody":`+string(benchBody(strconv.Itoa(k), pk))+`}`)
		}
		parsed, err := ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
		if err != nil {
			b.Fatal(err)
		}
		if res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey(pk), HasPartitionKey: true, Atomic: true, Operations: parsed}); err != nil || res.Failed {
			b.Fatalf("fill: %v", err)
		}
	}
}

// BenchmarkPartitionKeyDelete deletes a partition of pkDeleteBenchItems
// items in one operation; BenchmarkPartitionKeyDeleteItemByItem deletes the
// same items one request at a time, as a client without the operation must.
// ns/op is per partition; ms/partition is reported too.
func BenchmarkPartitionKeyDelete(b *testing.B) {
	ctx := b.Context()
	benchPKDelete(b, func(e *Engine, pk string) {
		if n, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey(pk)); err != nil || n != pkDeleteBenchItems {
			b.Fatalf("deleted %d: %v", n, err)
		}
	})
}

func BenchmarkPartitionKeyDeleteItemByItem(b *testing.B) {
	ctx := b.Context()
	benchPKDelete(b, func(e *Engine, pk string) {
		for i := range pkDeleteBenchItems {
			if _, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: strconv.Itoa(i), PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchPKDelete(b *testing.B, del func(e *Engine, pk string)) {
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e := openTestEngine(b, store)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		pk := "p" + strconv.Itoa(i)
		b.StopTimer()
		fillPartition(b, e, pk, pkDeleteBenchItems)
		b.StartTimer()
		began := time.Now()
		del(e, pk)
		total += time.Since(began)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/partition")
}

// BenchmarkComputedFilterIndexed and BenchmarkComputedFilterScan run the
// same selective filter on a computed property, indexed (the policy names
// its path) and not (the query evaluates it on every item).
func BenchmarkComputedFilterIndexed(b *testing.B) { benchComputedFilter(b, `,{"path":"/cp_lower/?"}`) }
func BenchmarkComputedFilterScan(b *testing.B)    { benchComputedFilter(b, ``) }

func benchComputedFilter(b *testing.B, include string) {
	ctx := b.Context()
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(ctx, store, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); store.Close() })
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},
		"computedProperties":[{"name":"cp_lower","query":"SELECT VALUE LOWER(c.name) FROM c"}],
		"indexingPolicy":{"includedPaths":[{"path":"/*"}`+include+`],"excludedPaths":[]}}`), nil); err != nil {
		b.Fatal(err)
	}
	const n = 5000
	for i := 0; i < n; i += 100 {
		ops := make([]string, 0, 100)
		for k := i; k < i+100; k++ {
			ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"%d","pk":"p","name":"Name%d","payload":"%s"}}`, k, k, strings.Repeat("x", 500)))
		}
		parsed, _ := ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
		if _, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true, Atomic: true, Operations: parsed}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true,
			Query: fmt.Sprintf(`SELECT VALUE c.id FROM c WHERE c.cp_lower = "name%d"`, i%n)})
		if err != nil || len(res.Items) != 1 {
			b.Fatalf("%d results: %v", len(res.Items), err)
		}
	}
}
