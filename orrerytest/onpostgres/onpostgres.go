// Package onpostgres starts orrerytest servers on PostgreSQL
// (storage/postgres): on a database of a throwaway server that it starts
// from the PostgreSQL binaries installed (storage/postgres/pgtest), or on
// yours. Servers started on one database act as one account, as gateways
// do.
//
// Importing it registers the storage "postgres" with orrerytest, so that
// ORRERY_TEST_STORAGE=postgres moves every server of the test binary that
// names no Dir or Storage to a fresh database: the compat suite's second
// pass. It is a package of its own so that orrerytest's users link
// PostgreSQL's driver only when they ask for it.
package onpostgres

import (
	"context"
	"os"
	"testing"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

func init() {
	orrerytest.RegisterStorage("postgres", func(t testing.TB) (storage.Store, error) {
		return open(URL(t))
	})
}

func open(url string) (storage.Store, error) {
	return postgres.Open(context.Background(), url, postgres.Options{MaxConns: 32})
}

// Storage keeps a test server's data in the PostgreSQL database at url
// (orrerytest.Options.Storage).
func Storage(url string) orrerytest.Storage {
	return func(testing.TB) (storage.Store, error) { return open(url) }
}

// Selected reports whether orrerytest.StorageEnv asks for PostgreSQL.
func Selected() bool { return os.Getenv(orrerytest.StorageEnv) == "postgres" }

// Available reports why servers cannot run on PostgreSQL (it is not
// installed), or nil.
func Available() error { return pgtest.Available() }

// Stop stops the throwaway PostgreSQL that servers here use, if one was
// started: call it from TestMain after m.Run.
func Stop() { pgtest.StopShared() }

// URL returns the URL of a fresh database on the throwaway PostgreSQL, for
// servers started with Storage: several on one URL act as one database, as
// gateways do. It skips the test when PostgreSQL is not installed (fails it
// with ORRERY_REQUIRE_POSTGRES=1).
func URL(t testing.TB) string {
	t.Helper()
	return pgtest.URL(t)
}

// StartGateways starts n servers on one fresh database (URL), each
// configured by opts (its Storage and Dir are replaced), as n stateless
// gateways of one account: what is written through one is read through
// every other. Spread clients across them with Server.Client. It skips the
// test when PostgreSQL is not installed (fails it with
// ORRERY_REQUIRE_POSTGRES=1).
func StartGateways(t testing.TB, n int, opts orrerytest.Options) []*orrerytest.Server {
	t.Helper()
	opts.Storage, opts.Dir = Storage(URL(t)), ""
	gws := make([]*orrerytest.Server, n)
	for i := range gws {
		gws[i] = orrerytest.StartWith(t, opts)
	}
	return gws
}
