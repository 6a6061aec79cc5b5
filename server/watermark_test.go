package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// blindStore is a shared store that, once blind is set, cannot tell its
// watermark: as PostgreSQL unreachable for the one statement that asks.
type blindStore struct {
	*memory.SharedStore
	blind atomic.Bool
}

func (s *blindStore) Watermark(ctx context.Context) (uint64, error) {
	if s.blind.Load() {
		return 0, fmt.Errorf("watermark: %w", storage.ErrUnavailable)
	}
	return s.SharedStore.Watermark(ctx)
}

// A response whose session token the server must ask the store for (a
// create refused with 409 on a shared store read none) is answered 503 in
// Cosmos's format when the store cannot tell its watermark, never with a
// session token of 0, which a client would take as "nothing written".
func TestUnknownWatermarkIsServiceUnavailableNotSessionZero(t *testing.T) {
	ctx := t.Context()
	store := &blindStore{SharedStore: memory.NewShared()}
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey, ReadOnly: readOnlyKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	c := &rawClient{t: t, url: hs.URL, key: EmulatorKey}
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	item := `{"id":"a","pk":"p"}`
	c.must("POST", "/dbs/db/colls/c/docs", item, pk(`["p"]`), 201)
	// The conflict's session token comes from the engine's watermark.
	r := c.must("POST", "/dbs/db/colls/c/docs", item, pk(`["p"]`), 409)
	if tok := r.header.Get("x-ms-session-token"); tok == "" || strings.HasSuffix(tok, "#0") {
		t.Fatalf("409 with the store reachable: session token %q", tok)
	}

	store.blind.Store(true)
	r = c.do("POST", "/dbs/db/colls/c/docs", item, pk(`["p"]`))
	if r.status != 503 {
		t.Fatalf("409 with the watermark unknown: status %d, want 503; session token %q: %s", r.status, r.header.Get("x-ms-session-token"), r.body)
	}
	var body struct{ Code, Message string }
	if err := json.Unmarshal(r.body, &body); err != nil || body.Code != "ServiceUnavailable" || body.Message == "" {
		t.Fatalf("503 body %s: want Cosmos's error format with code ServiceUnavailable (%v)", r.body, err)
	}
	if tok := r.header.Get("x-ms-session-token"); tok != "" {
		t.Fatalf("503 carries session token %q", tok)
	}
	store.blind.Store(false)
	c.must("POST", "/dbs/db/colls/c/docs", item, pk(`["p"]`), 409)
}
