package orrerytest

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// Server is a running in-process Orrery.
type Server struct {
	// Endpoint is the server's URL, e.g. http://127.0.0.1:40123/.
	Endpoint string
	// Key is the master key clients sign with.
	Key string
	// Client is an azcosmos client connected to the server.
	Client *azcosmos.Client
	// Engine is the server's engine, for tests that look beneath the API.
	Engine *engine.Engine
	// CertificatePEM is the certificate of a TLS server (Options.TLS), for
	// clients to trust; nil otherwise.
	CertificatePEM []byte
	// Faults holds the server's fault rules: add and remove rules while
	// the test runs (Options.Faults installs some at start).
	Faults *faults.Injector

	clientOpts *azcosmos.ClientOptions
}

// Options configure a test server.
type Options struct {
	// Dir, when set, keeps the data durably in that directory (Pebble, every
	// write fsynced) instead of in memory: for benchmarks and restart tests.
	Dir string
	// Postgres, when set, keeps the data in the PostgreSQL database at this
	// URL (storage/postgres); servers started on one URL act as one
	// database. Without Dir and Postgres, the environment variable
	// ORRERY_TEST_STORAGE=postgres gives each server a fresh database on a
	// throwaway PostgreSQL (storage/postgres/pgtest): the compat suite's
	// second run.
	Postgres string
	// ServeCrossPartitionQueries lets the server execute cross-partition
	// queries the service's gateway refuses (see engine.Options).
	ServeCrossPartitionQueries bool
	// PartitionKeyRanges is how many partition key ranges a new container
	// gets at least (see engine.Options); containers created with more
	// throughput get one per 10,000 RU/s all the same.
	PartitionKeyRanges int
	// Now, when set, is the server's clock (system properties, TTL and the
	// query functions that read the current time); time.Now when nil.
	Now func() time.Time
	// ScriptTimeout, when set, is the time budget of every stored procedure,
	// trigger and UDF run instead of the default 5 s: tests of runaway
	// scripts set a short one.
	ScriptTimeout time.Duration
	// QueryTimeBudget, QueryMemoryLimit and QueryMemoryPool, when set,
	// replace the engine's query limits (see engine.Options): tests of
	// runaway queries set small ones.
	QueryTimeBudget  time.Duration
	QueryMemoryLimit int64
	QueryMemoryPool  int64
	// Limits, when set, replace the server's default timeouts and body
	// memory cap (see server.Limits): tests of slow or large uploads.
	Limits server.Limits
	// ScriptLimits, when set, bound every script run instead of the defaults
	// (ScriptTimeout, when set, overrides its Timeout).
	ScriptLimits script.Limits
	// MaxConcurrentScripts, when set, is how many stored procedures and
	// triggers may run at once for their whole time budget (see
	// engine.Options).
	MaxConcurrentScripts int
	// SweepInterval, when set, is how often expired items are deleted for
	// real (see engine.Options): negative never, for tests of the TTL
	// backlog; small, for tests that wait for the sweeper.
	SweepInterval time.Duration
	// Metrics serves Prometheus metrics at /metrics (the master key as a
	// bearer token), as orrery serve does: requests, and the engine's change
	// feed, TTL and script figures.
	Metrics bool
	// TLS serves https with httptest's certificate (Server.CertificatePEM)
	// instead of plain http: the JavaScript SDK sends Entra ID tokens over
	// https only.
	TLS bool
	// AAD configures Entra ID (AAD) tokens (see server.AAD): the zero
	// value accepts any well-formed, unexpired JWT, as the emulator does;
	// with an Issuer's Keys and Roles, tokens are verified.
	AAD server.AAD
	// Faults are fault rules installed when the server starts (see
	// package faults); Server.Faults changes them later.
	Faults []faults.Rule
	// EnforceThroughput refuses requests over their container's or shared
	// database's provisioned RU/s with 429, as orrery serve
	// --enforce-throughput does.
	EnforceThroughput bool
}

// Start starts a server on memory storage and registers its shutdown with
// t.Cleanup. It fails the test if the server cannot start.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a server configured by opts; see Start.
func StartWith(t testing.TB, opts Options) *Server {
	ctx := t.Context()
	t.Helper()
	var store storage.Store = memory.New()
	pgURL := opts.Postgres
	if pgURL == "" && opts.Dir == "" && OnPostgres() {
		pgURL = pgtest.URL(t)
	}
	switch {
	case opts.Dir != "":
		s, err := pebble.Open(opts.Dir, pebble.Options{})
		if err != nil {
			t.Fatalf("orrerytest: opening storage: %v", err)
		}
		store = s
	case pgURL != "":
		s, err := postgres.Open(context.Background(), pgURL, postgres.Options{MaxConns: 32})
		if err != nil {
			t.Fatalf("orrerytest: opening storage: %v", err)
		}
		store = s
	}
	limits := opts.ScriptLimits
	if opts.ScriptTimeout > 0 {
		limits.Timeout = opts.ScriptTimeout
	}
	eng, err := engine.Open(ctx, store, engine.Options{
		ServeCrossPartitionQueries: opts.ServeCrossPartitionQueries,
		PartitionKeyRanges:         opts.PartitionKeyRanges,
		Now:                        opts.Now,
		ScriptLimits:               limits,
		MaxConcurrentScripts:       opts.MaxConcurrentScripts,
		SweepInterval:              opts.SweepInterval,
		QueryTimeBudget:            opts.QueryTimeBudget,
		QueryMemoryLimit:           opts.QueryMemoryLimit,
		QueryMemoryPool:            opts.QueryMemoryPool,
	})
	if err != nil {
		t.Fatalf("orrerytest: opening the engine: %v", err)
	}
	srv, err := server.New(server.Config{
		Engine: eng,
		Keys:   server.Keys{Master: server.EmulatorKey},
		AAD:    opts.AAD,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limits: opts.Limits,

		EnforceThroughput: opts.EnforceThroughput,
	})
	if err != nil {
		t.Fatalf("orrerytest: %v", err)
	}
	if len(opts.Faults) > 0 {
		if _, err := srv.Faults().Add(opts.Faults...); err != nil {
			t.Fatalf("orrerytest: %v", err)
		}
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	if opts.Metrics {
		reg := prometheus.NewRegistry()
		for _, c := range []prometheus.Collector{server.NewEngineCollector(eng), server.NewFaultCollector(srv)} {
			if err := reg.Register(c); err != nil {
				t.Fatalf("orrerytest: %v", err)
			}
		}
		h, err := server.Observe(srv, server.ObserveOptions{Registerer: reg, Gatherer: reg, MetricsKey: server.EmulatorKey})
		if err != nil {
			t.Fatalf("orrerytest: %v", err)
		}
		hs.Config.Handler = h
	}
	if opts.TLS {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(func() {
		hs.Close()
		eng.Close()
		store.Close()
	})
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		t.Fatalf("orrerytest: %v", err)
	}
	endpoint := hs.URL + "/"
	var clientOpts *azcosmos.ClientOptions
	var certPEM []byte
	if opts.TLS {
		clientOpts = &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hs.Client()}}
		certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, clientOpts)
	if err != nil {
		t.Fatalf("orrerytest: %v", err)
	}
	return &Server{Endpoint: endpoint, Key: server.EmulatorKey, Client: client, Engine: eng, CertificatePEM: certPEM, Faults: srv.Faults(), clientOpts: clientOpts}
}

// StorageEnv is the environment variable that moves the servers of tests
// to PostgreSQL: ORRERY_TEST_STORAGE=postgres.
const StorageEnv = "ORRERY_TEST_STORAGE"

// OnPostgres reports whether StorageEnv asks for PostgreSQL.
func OnPostgres() bool { return os.Getenv(StorageEnv) == "postgres" }

// NewAADClient returns an azcosmos client of the server that signs in with
// an Entra ID token credential (Issuer.Credential in tests).
func (s *Server) NewAADClient(cred azcore.TokenCredential) (*azcosmos.Client, error) {
	return azcosmos.NewClient(s.Endpoint, cred, s.clientOpts)
}

// SplitPartitionKeyRange splits partition key range id of container coll in
// database db through the server's administrative call
// (POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split, master key) and
// returns the ids of the two children. The parent then answers 410/1002 to
// range-scoped requests, as after a split in the service.
func (s *Server) SplitPartitionKeyRange(ctx context.Context, db, coll, id string) ([]string, error) {
	link := "dbs/" + db + "/colls/" + coll + "/pkranges/" + id
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, http.MethodPost, "pkranges", link, date)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"_admin/"+link+"/split", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("orrerytest: splitting range %s: %s: %s", id, resp.Status, body)
	}
	var feed struct {
		PartitionKeyRanges []struct {
			ID string `json:"id"`
		}
	}
	if err := json.Unmarshal(body, &feed); err != nil {
		return nil, err
	}
	ids := make([]string, len(feed.PartitionKeyRanges))
	for i, r := range feed.PartitionKeyRanges {
		ids[i] = r.ID
	}
	return ids, nil
}

// PostgresAvailable reports why the servers cannot run on PostgreSQL (it is
// not installed), or nil.
func PostgresAvailable() error { return pgtest.Available() }

// StopPostgres stops the throwaway PostgreSQL that OnPostgres servers use,
// if one was started: call it from TestMain after m.Run.
func StopPostgres() { pgtest.StopShared() }

// PostgresURL returns the URL of a fresh database on the throwaway
// PostgreSQL, for servers started with Options.Postgres: several on one URL
// act as one database, as gateways do. It skips the test when PostgreSQL is
// not installed (fails it with ORRERY_REQUIRE_POSTGRES=1).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return pgtest.URL(t)
}

// StartGateways starts n servers on one fresh PostgreSQL database
// (PostgresURL), each configured by opts (its Postgres and Dir are
// replaced), as n stateless gateways of one account: what is written
// through one is read through every other. Spread clients across them
// with Server.Client. It skips the test when PostgreSQL is not installed
// (fails it with ORRERY_REQUIRE_POSTGRES=1).
func StartGateways(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	opts.Postgres, opts.Dir = PostgresURL(t), ""
	gws := make([]*Server, n)
	for i := range gws {
		gws[i] = StartWith(t, opts)
	}
	return gws
}
