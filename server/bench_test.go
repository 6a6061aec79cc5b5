package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/pebble"
)

// benchBody is the 1 KB item both benchmarks move.
var benchBody = []byte(fmt.Sprintf(`{"id":"r","pk":"p","payload":%q}`, bytes.Repeat([]byte("x"), 1000)))

// benchServer serves a container on durable storage over loopback.
func benchServer(b *testing.B) (*httptest.Server, *engine.Engine) {
	ctx := b.Context()
	b.Helper()
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng, _ := engine.Open(ctx, store, engine.Options{})
	srv, _ := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv)
	b.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	eng.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	eng.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
	return hs, eng
}

// signedRequest builds a request signed with the emulator key.
func signedRequest(b *testing.B, base, method, rtype, link, path, pk string, body []byte) *http.Request {
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, method, rtype, link, date)
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-documentdb-partitionkey", pk)
	return req
}

func do(b *testing.B, client *http.Client, req *http.Request, want int) {
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("status %d, want %d", resp.StatusCode, want)
	}
}

// BenchmarkPointRead is a signed point read of a 1 KB item through the whole
// server (auth, routing, engine, durable storage) over loopback.
func BenchmarkPointRead(b *testing.B) {
	ctx := b.Context()
	hs, eng := benchServer(b)
	if _, err := eng.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", Body: benchBody}); err != nil {
		b.Fatal(err)
	}
	req := signedRequest(b, hs.URL, "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", `["p"]`, nil)
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		do(b, client, req, 200)
	}
}

// benchCreates creates 1 KB items over HTTP from writers goroutines, each
// into its own partition, every write fsynced.
func benchCreates(b *testing.B, writers int) {
	hs, _ := benchServer(b)
	client := hs.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = writers
	var n atomic.Int64
	// Built once: the client's work should not weigh on the server's figures.
	payload := strings.Repeat("x", 1000)
	b.SetParallelism((writers + 1) / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			pk := "p" + strconv.FormatInt(i%int64(writers), 10)
			body := []byte(`{"id":"` + strconv.FormatInt(i, 10) + `","pk":"` + pk + `","payload":"` + payload + `"}`)
			do(b, client, signedRequest(b, hs.URL, "POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", `["`+pk+`"]`, body), 201)
		}
	})
}

// BenchmarkCreate1Writer is the single-writer rate of durable creates over HTTP.
func BenchmarkCreate1Writer(b *testing.B) { benchCreates(b, 1) }

// BenchmarkCreate32Writers is 32 concurrent writers: group commit should
// share fsyncs between them.
func BenchmarkCreate32Writers(b *testing.B) { benchCreates(b, 32) }

// BenchmarkBareHTTP is the floor: a bare net/http handler answering the same
// request (the same headers, signature included) with the same body over
// loopback.
func BenchmarkBareHTTP(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(benchBody)
	}))
	defer hs.Close()
	req := signedRequest(b, hs.URL, "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", `["p"]`, nil)
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		do(b, client, req, 200)
	}
}
