package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/pebble"
)

// benchBody is the 1 KB item both benchmarks move.
var benchBody = []byte(fmt.Sprintf(`{"id":"r","pk":"p","payload":%q}`, bytes.Repeat([]byte("x"), 1000)))

// BenchmarkPointRead is a signed point read of a 1 KB item through the whole
// server (auth, routing, engine, durable storage) over loopback.
func BenchmarkPointRead(b *testing.B) {
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng, _ := engine.Open(store, engine.Options{})
	srv, _ := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); eng.Close(); store.Close() }()
	eng.CreateDatabase([]byte(`{"id":"db"}`), nil)
	eng.CreateContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
	if _, err := eng.CreateItem(&engine.ItemRequest{Database: "db", Container: "c", Body: benchBody}); err != nil {
		b.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "GET", "docs", "dbs/db/colls/c/docs/r", date)
	req, _ := http.NewRequest("GET", hs.URL+"/dbs/db/colls/c/docs/r", nil)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-documentdb-partitionkey", `["p"]`)
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkBareHTTP is the floor: a bare net/http handler answering the same
// body over loopback.
func BenchmarkBareHTTP(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(benchBody)
	}))
	defer hs.Close()
	req, _ := http.NewRequest("GET", hs.URL+"/dbs/db/colls/c/docs/r", nil)
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
