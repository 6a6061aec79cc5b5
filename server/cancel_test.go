package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// statusOf records the status a handler wrote.
type statusOf struct {
	http.ResponseWriter
	status atomic.Int32
}

func (w *statusOf) WriteHeader(code int) {
	w.status.CompareAndSwap(0, int32(code))
	w.ResponseWriter.WriteHeader(code)
}

// A client that gives up stops the PostgreSQL work its request started: a
// read, an upsert and a query stuck in PostgreSQL (behind a lock another
// session holds on the table) whose client cancels end on the gateway
// promptly after the cancel, not at --postgres-timeout; PostgreSQL stops
// waiting for them (pg_stat_activity shows no backend waiting on a lock),
// the pool has every connection back, and the request is not answered (or
// counted) as a server fault (500).
func TestClientCancelStopsPostgresWork(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	const timeout = time.Minute
	store, err := postgres.Open(ctx, url, postgres.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, store, engine.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	type done struct {
		status int
		at     time.Time
	}
	finished := make(chan done, 16)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusOf{ResponseWriter: w}
		srv.ServeHTTP(rec, r)
		finished <- done{int(rec.status.Load()), time.Now()}
	}))
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	c := &rawClient{t: t, url: hs.URL, key: EmulatorKey}
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	<-finished
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	<-finished
	c.must("POST", itemsPath, `{"id":"acked","pk":"a"}`, nil, 201)
	<-finished

	// Another session locks the table: every statement of the gateway waits.
	lock := pgtest.LockTable(t, url)

	ops := []struct {
		name, method, path, body string
		headers                  map[string]string
	}{
		{"read", "GET", itemsPath + "/acked", "", nil},
		{"upsert", "POST", itemsPath, `{"id":"maybe","pk":"a"}`, map[string]string{"x-ms-documentdb-is-upsert": "true"}},
		{"query", "POST", itemsPath, `{"query":"SELECT * FROM c"}`, map[string]string{
			"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true"}},
	}
	bound := 10 * time.Second // far inside the timeout, on a loaded machine
	for _, op := range ops {
		rctx, cancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(rctx, op.method, hs.URL+op.path, strings.NewReader(op.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.signedHeaders(op.method, op.path)
		for k, v := range op.headers {
			req.Header.Set(k, v)
		}
		answered := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				err = errors.New(resp.Status)
			}
			answered <- err
		}()
		// Cancel once the request waits in PostgreSQL.
		deadline := time.Now().Add(bound)
		for lock.Waiters() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no statement of the gateway waits on the lock after %v", op.name, bound)
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		cancel()
		if err := <-answered; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: the client got %v, want its cancel", op.name, err)
		}
		select {
		case d := <-finished:
			took := d.at.Sub(start)
			t.Logf("%s cancelled by its client: the gateway was done %v after the cancel, answering %d", op.name, took.Round(time.Millisecond), d.status)
			if took > bound {
				t.Errorf("%s cancelled by its client: the gateway worked on for %v, more than %v", op.name, took, bound)
			}
			if d.status == http.StatusInternalServerError {
				t.Errorf("%s cancelled by its client was answered 500, a server fault", op.name)
			}
		case <-time.After(bound):
			t.Fatalf("%s cancelled by its client: the gateway still works on it %v after (timeout %v)", op.name, bound, timeout)
		}
		for lock.Waiters() > 0 || store.Pool().Stat().AcquiredConns() > 0 {
			if time.Now().After(start.Add(bound)) {
				t.Fatalf("%s cancelled by its client: %v after, %d backends still wait on the lock, %d pool connections acquired",
					op.name, bound, lock.Waiters(), store.Pool().Stat().AcquiredConns())
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: PostgreSQL stopped waiting and the pool had its connection back %v after the cancel", op.name, time.Since(start).Round(time.Millisecond))
	}
	lock.Release()
	c.must("GET", itemsPath+"/acked", "", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`}, 200)
	<-finished
}
