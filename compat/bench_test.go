package compat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// benchItem is a 1 KB item.
func benchItem(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"pk":"p","payload":%q}`, id, bytes.Repeat([]byte("x"), 1000)))
}

func benchContainer(b *testing.B, durable bool) *azcosmos.ContainerClient {
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
	db, _ := s.Client.NewDatabase("bench")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		b.Fatal(err)
	}
	c, _ := db.NewContainer("c")
	return c
}

// BenchmarkSDKPointRead reads one 1 KB item through the Go SDK over loopback.
func BenchmarkSDKPointRead(b *testing.B) {
	c := benchContainer(b, true)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.CreateItem(ctx, pk, benchItem("r"), nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.ReadItem(ctx, pk, "r", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawHTTPRoundTrip is the floor a point read is measured against:
// a bare net/http GET answering the same 1 KB body over loopback.
func BenchmarkRawHTTPRoundTrip(b *testing.B) {
	body := benchItem("r")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer hs.Close()
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Get(hs.URL + "/dbs/bench/colls/c/docs/r")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkSDKCreate creates 1 KB items, one writer, each fsynced.
func BenchmarkSDKCreate(b *testing.B) {
	c := benchContainer(b, true)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.CreateItem(ctx, pk, benchItem(fmt.Sprint(i)), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSDKReplace replaces one 1 KB item, one writer, each fsynced.
func BenchmarkSDKReplace(b *testing.B) {
	c := benchContainer(b, true)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.CreateItem(ctx, pk, benchItem("r"), nil); err != nil {
		b.Fatal(err)
	}
	item := benchItem("r")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.ReplaceItem(ctx, pk, "r", item, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSDKCreate32Writers creates 1 KB items from 32 goroutines into 32
// partitions: group commit should share fsyncs between them.
func BenchmarkSDKCreate32Writers(b *testing.B) {
	c := benchContainer(b, true)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism((32 + 1) / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			pk := fmt.Sprintf("p%d", i%32)
			body := []byte(fmt.Sprintf(`{"id":"%d","pk":%q,"payload":%q}`, i, pk, bytes.Repeat([]byte("x"), 1000)))
			if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
