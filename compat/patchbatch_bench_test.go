package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// Benchmarks through the Go SDK over loopback HTTP to an in-process server on
// memory storage (and, for creates, on Pebble). Writers run 20 at a time (SetParallelism over GOMAXPROCS).

const benchWriters = 20

// keyedBenchContainer starts a server, on memory storage or, when durable,
// on Pebble with synced commits (what the orrery command serves from), and
// returns a client of a new container partitioned on pkPath.
func keyedBenchContainer(b *testing.B, pkPath string, durable bool) *azcosmos.ContainerClient {
	b.Helper()
	opts := orrerytest.Options{}
	if durable {
		opts.Dir = b.TempDir()
	}
	s := orrerytest.StartWith(b, opts)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "bench"}, nil); err != nil {
		b.Fatal(err)
	}
	d, _ := s.Client.NewDatabase("bench")
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}}}, nil); err != nil {
		b.Fatal(err)
	}
	c, _ := d.NewContainer("c")
	return c
}

// setParallelWriters makes RunParallel use benchWriters goroutines.
func setParallelWriters(b *testing.B) {
	b.SetParallelism(max(1, benchWriters/runtime.GOMAXPROCS(0)))
}

// benchIncr patches incr on one hot item or, with spread, on one item per
// writer.
func benchIncr(b *testing.B, spread bool) {
	c := keyedBenchContainer(b, "/id", false)
	ctx := context.Background()
	for i := range benchWriters {
		id := fmt.Sprint("n", i)
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), []byte(`{"id":"`+id+`","n":0}`), nil); err != nil {
			b.Fatal(err)
		}
	}
	var ops azcosmos.PatchOperations
	ops.AppendIncrement("/n", 1)
	var writer atomic.Int32
	setParallelWriters(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := "n0"
		if spread {
			id = fmt.Sprint("n", int(writer.Add(1)-1)%benchWriters)
		}
		pk := azcosmos.NewPartitionKeyString(id)
		for pb.Next() {
			if _, err := c.PatchItem(ctx, pk, id, ops, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkPatchIncrOneHotItem(b *testing.B)            { benchIncr(b, false) }
func BenchmarkPatchIncrTwentyItems(b *testing.B)           { benchIncr(b, true) }
func BenchmarkCreateSingle(b *testing.B)                   { benchCreates(b, false, false) }
func BenchmarkCreateInBatchesOfHundred(b *testing.B)       { benchCreates(b, false, true) }
func BenchmarkCreateSinglePebble(b *testing.B)             { benchCreates(b, true, false) }
func BenchmarkCreateInBatchesOfHundredPebble(b *testing.B) { benchCreates(b, true, true) }
func BenchmarkCounterPatchIncr(b *testing.B)               { benchCounter(b, true) }
func BenchmarkCounterReadReplaceWithETag(b *testing.B)     { benchCounter(b, false) }

// benchCreates creates b.N items in one partition, one request each or 100
// per transactional batch; ns/op is the time per item.
func benchCreates(b *testing.B, durable, batched bool) {
	c := keyedBenchContainer(b, "/pk", durable)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	b.ResetTimer()
	for i := 0; i < b.N; {
		if !batched {
			if _, err := c.CreateItem(ctx, pk, fmt.Appendf(nil, `{"id":"i%d","pk":"p","v":%d}`, i, i), nil); err != nil {
				b.Fatal(err)
			}
			i++
			continue
		}
		batch := c.NewTransactionalBatch(pk)
		for k := 0; k < 100 && i < b.N; k++ {
			batch.CreateItem(fmt.Appendf(nil, `{"id":"i%d","pk":"p","v":%d}`, i, i), nil)
			i++
		}
		resp, err := c.ExecuteTransactionalBatch(ctx, batch, nil)
		if err != nil || !resp.Success {
			b.Fatalf("batch: %v %v", err, statusCodes(resp))
		}
	}
}

// benchCounter increments one counter from 20 writers with patch incr, or
// with read + replace with If-Match, retrying on 412; it reports the retries.
func benchCounter(b *testing.B, patch bool) {
	c := keyedBenchContainer(b, "/id", false)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("k")
	if _, err := c.CreateItem(ctx, pk, []byte(`{"id":"k","n":0}`), nil); err != nil {
		b.Fatal(err)
	}
	var ops azcosmos.PatchOperations
	ops.AppendIncrement("/n", 1)
	var retries atomic.Int64
	setParallelWriters(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if patch {
				if _, err := c.PatchItem(ctx, pk, "k", ops, nil); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			for {
				r, err := c.ReadItem(ctx, pk, "k", nil)
				if err != nil {
					b.Error(err)
					return
				}
				var d map[string]any
				json.Unmarshal(r.Value, &d)
				d["n"] = d["n"].(float64) + 1
				body, _ := json.Marshal(d)
				_, err = c.ReplaceItem(ctx, pk, "k", body, &azcosmos.ItemOptions{IfMatchEtag: &r.ETag})
				var re *azcore.ResponseError
				if errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed {
					retries.Add(1)
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
				break
			}
		}
	})
	b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
}
