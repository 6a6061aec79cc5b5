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
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// BenchmarkScriptExecution puts the cost of running a stored procedure next
// to a plain point write, both as signed requests through the whole server
// over loopback: an upsert of a small item; a procedure that only sets its
// response; and a procedure that upserts the same item. On memory storage
// and on Pebble with synced commits.
func BenchmarkScriptExecution(b *testing.B) {
	ctx := b.Context()
	const item = `{"id":"w","pk":"p","v":1}`
	sprocs := map[string]string{
		"trivial": `function trivial() { getContext().getResponse().setBody(1); }`,
		"upsert": `function upsert(doc) {
			var coll = getContext().getCollection();
			coll.upsertDocument(coll.getSelfLink(), doc, function (err, d) {
				if (err) throw err;
				getContext().getResponse().setBody(d.id);
			});
		}`,
	}
	cases := []struct {
		name, method, path, rtype, link, body string
		headers                               map[string]string
	}{
		{"point-upsert", "POST", "/dbs/db/colls/c/docs", "docs", "dbs/db/colls/c", item, map[string]string{"x-ms-documentdb-is-upsert": "true"}},
		{"sproc-trivial", "POST", "/dbs/db/colls/c/sprocs/trivial", "sprocs", "dbs/db/colls/c/sprocs/trivial", `[]`, nil},
		{"sproc-upsert", "POST", "/dbs/db/colls/c/sprocs/upsert", "sprocs", "dbs/db/colls/c/sprocs/upsert", "[" + item + "]", nil},
	}
	for _, durable := range []bool{false, true} {
		kind := "memory"
		if durable {
			kind = "pebble"
		}
		for _, tc := range cases {
			b.Run(tc.name+"/"+kind, func(b *testing.B) {
				var store storage.Store = memory.New()
				if durable {
					p, err := pebble.Open(b.TempDir(), pebble.Options{})
					if err != nil {
						b.Fatal(err)
					}
					store = p
				}
				eng, err := engine.Open(ctx, store, engine.Options{})
				if err != nil {
					b.Fatal(err)
				}
				srv, _ := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				hs := httptest.NewServer(srv)
				defer func() { hs.Close(); eng.Close(); store.Close() }()
				eng.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
				eng.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
				for id, body := range sprocs {
					if _, err := eng.CreateScript(ctx, "db", "c", engine.StoredProcedures, fmt.Appendf(nil, `{"id":%q,"body":%q}`, id, body)); err != nil {
						b.Fatal(err)
					}
				}
				date := time.Now().UTC().Format(http.TimeFormat)
				auth, _ := Sign(EmulatorKey, tc.method, tc.rtype, tc.link, date)
				client := hs.Client()
				send := func() {
					req, _ := http.NewRequest(tc.method, hs.URL+tc.path, bytes.NewReader([]byte(tc.body)))
					req.Header.Set("x-ms-date", date)
					req.Header.Set("Authorization", auth)
					req.Header.Set("x-ms-documentdb-partitionkey", `["p"]`)
					for k, v := range tc.headers {
						req.Header.Set(k, v)
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode >= 300 {
						b.Fatalf("status %d: %s", resp.StatusCode, out)
					}
				}
				send() // the first run makes the JavaScript runtime and compiles
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					send()
				}
			})
		}
	}
}
