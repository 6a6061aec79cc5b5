package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/memory"
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

// BenchmarkObservedRequest is one request through the handler a server
// serves, Observe's metrics and access log included, without the network:
// a point read, an upsert and a replace of a 1 KB item, a patch incr
// of a small one and a query page within one partition in memory, with the headers the
// Go SDK sends (its activity id included; the server's clock fixed, so
// that the signatures are the same in every run), the access log on the handler orrery serve logs with. Its
// allocations per request are exact, and what the
// server's layers (classification, authentication, metrics, access log,
// activity id, session token) add to the engine's.
func BenchmarkObservedRequest(b *testing.B) {
	store := memory.New()
	eng, err := engine.Open(b.Context(), store, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// The server's clock stands still, so that every run signs and checks
	// the same payloads (instruction counts compare across runs).
	now := time.Now().UTC().Truncate(time.Second)
	srv, _ := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	reg := prometheus.NewRegistry()
	h, err := Observe(srv, ObserveOptions{Registerer: reg, AccessLog: slog.New(NewTextLogHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(); store.Close() })
	eng.CreateDatabase(b.Context(), []byte(`{"id":"db"}`), nil)
	eng.CreateContainer(b.Context(), "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
	request := func(method, rtype, link, path string, body []byte) *http.Request {
		date := now.Format(http.TimeFormat)
		auth, _ := Sign(EmulatorKey, method, rtype, link, date)
		r := httptest.NewRequest(method, path, bytes.NewReader(body))
		for k, v := range map[string]string{"X-Ms-Date": date, "Authorization": auth, "X-Ms-Version": "2020-07-15",
			"X-Ms-Activity-Id":             "79fd0bda-b0c0-484e-765d-0c0e095080a2",
			"X-Ms-Documentdb-Partitionkey": `["p"]`, "Content-Type": "application/json", "Accept": "application/json",
			"User-Agent": "azsdk-go-azcosmos/v1.5.0 (go1.26.8; linux)", "X-Ms-Cosmos-Sdk-Supportedcapabilities": "1"} {
			r.Header.Set(k, v)
		}
		return r
	}
	serve := func(b *testing.B, r *http.Request, body []byte, want int) {
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			b.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
		}
	}
	upsert := request("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", benchBody)
	upsert.Header.Set("X-Ms-Documentdb-Is-Upsert", "True")
	serve(b, upsert, benchBody, 201) // then each upsert replaces it
	b.Run("upsert", func(b *testing.B) {
		r := upsert
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, benchBody, 200)
		}
	})
	b.Run("read", func(b *testing.B) {
		r := request("GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil)
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, nil, 200)
		}
	})
	// read-token: the point read authorized by a resource token (a
	// permission on the container) instead of the master key: the token's
	// HMAC, the permission's lookup and the scope check.
	b.Run("read-token", func(b *testing.B) {
		if _, err := eng.CreateUser(b.Context(), "db", []byte(`{"id":"u"}`)); err != nil {
			b.Fatal(err)
		}
		p, err := eng.CreatePermission(b.Context(), "db", "u", []byte(`{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`))
		if err != nil {
			b.Fatal(err)
		}
		token, err := srv.keys.mintResourceToken(p.RID, now.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		r := request("GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil)
		r.Header.Set("Authorization", url.QueryEscape(token))
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, nil, 200)
		}
	})
	// missing: a read of an item that does not exist, answered 404 (an
	// answer the SDKs get in the ordinary course, as 409 and 412).
	b.Run("missing", func(b *testing.B) {
		r := request("GET", "docs", "dbs/db/colls/c/docs/nope", "/dbs/db/colls/c/docs/nope", nil)
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, nil, 404)
		}
	})
	b.Run("replace", func(b *testing.B) {
		r := request("PUT", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", benchBody)
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, benchBody, 200)
		}
	})
	// patch: an incr of one small item, as BenchmarkServer's patch sends it.
	hot := []byte(`{"id":"hot","pk":"p","n":0}`)
	if _, err := eng.CreateItem(b.Context(), &engine.ItemRequest{Database: "db", Container: "c", Body: hot}); err != nil {
		b.Fatal(err)
	}
	b.Run("patch", func(b *testing.B) {
		body := []byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`)
		r := request("PATCH", "docs", "dbs/db/colls/c/docs/hot", "/dbs/db/colls/c/docs/hot", body)
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, body, 200)
		}
	})
	// query: one page of a parameterized query within one partition, as
	// BenchmarkServer's query sends it, over 100 items of which one matches.
	for i := range 100 {
		doc := fmt.Appendf(nil, `{"id":"q%d","pk":"p","n":%d}`, i, i)
		if _, err := eng.CreateItem(b.Context(), &engine.ItemRequest{Database: "db", Container: "c", Body: doc}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("query", func(b *testing.B) {
		body := []byte(`{"query":"SELECT * FROM c WHERE c.n = @n","parameters":[{"name":"@n","value":42}]}`)
		r := request("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", body)
		r.Header.Set("Content-Type", "application/query+json")
		r.Header.Set("X-Ms-Documentdb-Isquery", "True")
		r.Header.Set("X-Ms-Documentdb-Populatequerymetrics", "true")
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r, body, 200)
		}
	})
}
