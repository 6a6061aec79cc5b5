package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// tripsEngine opens an engine on PostgreSQL through a proxy that counts
// round trips, with the test's database and container created.
func tripsEngine(t testing.TB) (*Engine, *pgtest.Proxy) {
	t.Helper()
	if err := pgtest.Available(); err != nil {
		pgtest.Skip(t, err)
	}
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, url))
	s, err := postgres.Open(context.Background(), proxy.URL(t, url), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return openTestEngine(t, s), proxy
}

// itemRequest runs an item operation as the server does: the container
// looked up for the response's headers, the operation, and the session
// token, asked of the engine when the operation did not bring it.
func itemRequest(e *Engine, op func() (*ItemResult, error)) (*ItemResult, uint64, error) {
	if _, err := e.CachedContainer("db", "c"); err != nil {
		return nil, 0, err
	}
	res, err := op()
	if err != nil {
		return nil, 0, err
	}
	session := res.SessionLSN
	if session == 0 {
		session = e.SessionLSN()
	}
	return res, session, nil
}

// fewestTrips is the fewest round trips of several runs of do: the first
// run on each connection of the pool prepares the statements it sends.
func fewestTrips(t *testing.T, proxy *pgtest.Proxy, do func() error) int64 {
	t.Helper()
	n := int64(1 << 30)
	for range 8 {
		before := proxy.RoundTrips()
		if err := do(); err != nil {
			t.Fatal(err)
		}
		n = min(n, proxy.RoundTrips()-before)
	}
	return n
}

// TestSharedItemRequestsMakeNoExtraRoundTrips: on PostgreSQL an item
// request's catalog check and session token ride with its own statements.
// A point read is one round trip (the item, the catalog version and the
// watermark in one statement); a write is four: the locks with the catalog
// version, the item's read, the sequence number, and the writes with the
// COMMIT and the watermark. Query and change-feed pages are logged.
func TestSharedItemRequestsMakeNoExtraRoundTrips(t *testing.T) {
	e, proxy := tripsEngine(t)
	if _, err := e.CreateItem(req("", "p", `{"id":"x","pk":"p","n":0}`)); err != nil {
		t.Fatal(err)
	}
	i := 0
	etag := ""
	cases := []struct {
		name    string
		most    int64
		prepare func() error
		op      func() (*ItemResult, error)
	}{
		{"PointRead", 1, nil, func() (*ItemResult, error) { return e.ReadItem(req("x", "p", "")) }},
		{"Create", 4, nil, func() (*ItemResult, error) {
			i++
			return e.CreateItem(req("", "p", fmt.Sprintf(`{"id":"c%d","pk":"p"}`, i)))
		}},
		{"Upsert", 4, nil, func() (*ItemResult, error) { return e.UpsertItem(req("", "p", `{"id":"u","pk":"p"}`)) }},
		{"ReplaceWithETag", 4, func() error {
			cur, err := e.ReadItem(req("x", "p", ""))
			if err == nil {
				etag = cur.ETag
			}
			return err
		}, func() (*ItemResult, error) {
			r := req("x", "p", `{"id":"x","pk":"p","n":1}`)
			r.IfMatch = etag
			return e.ReplaceItem(r)
		}},
		{"Patch", 4, nil, func() (*ItemResult, error) {
			return e.PatchItem(req("x", "p", `{"operations":[{"op":"incr","path":"/n","value":1}]}`))
		}},
	}
	for _, c := range cases {
		n := int64(1 << 30)
		for range 8 {
			if c.prepare != nil {
				if err := c.prepare(); err != nil {
					t.Fatal(err)
				}
			}
			before := proxy.RoundTrips()
			if _, _, err := itemRequest(e, c.op); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			n = min(n, proxy.RoundTrips()-before)
		}
		t.Logf("%s: %d round trips", c.name, n)
		if n > c.most {
			t.Errorf("%s takes %d round trips to PostgreSQL, want at most %d", c.name, n, c.most)
		}
	}
	query := fewestTrips(t, proxy, func() error {
		_, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c",
			Query: "SELECT * FROM c", PartitionKey: StringKey("p"), HasPartitionKey: true})
		e.SessionLSN()
		return err
	})
	feed := fewestTrips(t, proxy, func() error {
		_, err := e.ReadChangeFeed(&ChangeFeedRequest{Database: "db", Container: "c",
			PartitionKey: StringKey("p"), HasPartitionKey: true})
		e.SessionLSN()
		return err
	})
	t.Logf("QueryPage: %d round trips; ChangeFeedPage: %d round trips", query, feed)
}
