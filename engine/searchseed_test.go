package engine

import (
	"sync"
	"testing"
	"time"
)

// openSeededSearch opens an engine with opts on a test store of the pass
// (newTestStore), closed when the test ends, with the database "db" and a
// container of each body: the set-up the search tests share.
func openSeededSearch(tb testing.TB, opts Options, bodies ...[]byte) *Engine {
	tb.Helper()
	ctx := tb.Context()
	e, err := Open(ctx, newTestStore(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		tb.Fatal(err)
	}
	for _, body := range bodies {
		if _, err := e.CreateContainer(ctx, "db", body, nil); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

// fixedClock is a clock standing still at one instant until advanced, so
// that time to live expires on cue.
func fixedClock() (now func() time.Time, advance func(time.Duration)) {
	t := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return t },
		func(d time.Duration) { mu.Lock(); defer mu.Unlock(); t = t.Add(d) }
}

// queryRowsRead runs a query on the container coll of "db" (within the
// partition pk, or over every range when pk is empty) and returns its rows
// and how many items it read.
func queryRowsRead(t *testing.T, e *Engine, coll, q, pk string) ([]string, int64) {
	t.Helper()
	req := &QueryRequest{Database: "db", Container: coll, Query: q, MaxItems: 1000, SinglePartitionKeyRange: true}
	if pk != "" {
		req.PartitionKey, req.HasPartitionKey, req.SinglePartitionKeyRange = StringKey(pk), true, false
	}
	res, err := e.QueryItems(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var rows []string
	for _, row := range res.Items {
		rows = append(rows, string(row))
	}
	return rows, res.Metrics.RetrievedDocumentCount
}
