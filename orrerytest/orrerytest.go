package orrerytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/instance"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
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
	// ComputeGatewayEndpoint is the URL of the server's compute gateway
	// (Options.ComputeGateway); "" without one.
	ComputeGatewayEndpoint string
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
	// Storage, when set, opens the server's store instead (the server
	// closes it when the test ends): orrerytest/onpostgres.Storage keeps the
	// data in a PostgreSQL database, where servers started on one database
	// act as one account. Without Dir and Storage the data is in memory,
	// unless StorageEnv names a registered storage (see RegisterStorage).
	Storage Storage
	// Engine configures the engine as engine.Open takes it: the clock
	// (Now), script limits, query limits, the TTL sweep's interval,
	// partition key ranges, cross-partition queries.
	Engine engine.Options
	// Limits, when set, replace the server's default timeouts and body
	// memory cap (see server.Limits): tests of slow or large uploads.
	Limits server.Limits
	// Metrics serves Prometheus metrics at /metrics (the master key as a
	// bearer token), as orrery serve does: requests, and the engine's change
	// feed, TTL and script figures.
	Metrics bool
	// TLS serves https (and plain http on the same port) with a generated
	// certificate (Server.CertificatePEM), as orrery serve does: the
	// JavaScript SDK sends Entra ID tokens over https only.
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
	// ComputeGateway serves the emulator's compute gateway on a second
	// loopback port (Server.ComputeGatewayEndpoint), as orrery serve
	// --compute-gateway-addr does.
	ComputeGateway bool
}

// Storage opens the store of a test server.
type Storage func(t testing.TB) (storage.Store, error)

// StorageEnv is the environment variable that moves the servers of tests
// to another storage: ORRERY_TEST_STORAGE=postgres, with
// orrerytest/onpostgres imported, runs every server that names no Dir or
// Storage on a fresh PostgreSQL database.
const StorageEnv = "ORRERY_TEST_STORAGE"

var (
	storagesMu sync.Mutex
	storages   = map[string]Storage{}
)

// RegisterStorage names a storage for StorageEnv. orrerytest/onpostgres
// registers "postgres" when imported: orrerytest itself links no storage
// but memory and Pebble.
func RegisterStorage(name string, s Storage) {
	storagesMu.Lock()
	defer storagesMu.Unlock()
	storages[name] = s
}

// envStorage is the storage StorageEnv names; nil for memory.
func envStorage(t testing.TB) Storage {
	name := os.Getenv(StorageEnv)
	if name == "" || name == "memory" {
		return nil
	}
	storagesMu.Lock()
	s, ok := storages[name]
	storagesMu.Unlock()
	if !ok {
		t.Fatalf("orrerytest: %s=%s, but no storage of that name is registered: import its package (for postgres, github.com/orrery-db/orrery/orrerytest/onpostgres) in the test", StorageEnv, name)
	}
	return s
}

// Start starts a server on memory storage and registers its shutdown with
// t.Cleanup. It fails the test if the server cannot start.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a server configured by opts; see Start.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	open := opts.Storage
	switch {
	case open != nil:
	case opts.Dir != "":
		open = func(testing.TB) (storage.Store, error) { return pebble.Open(opts.Dir, pebble.Options{}) }
	default:
		if open = envStorage(t); open == nil {
			open = func(testing.TB) (storage.Store, error) { return memory.New(), nil }
		}
	}
	store, err := open(t)
	if err != nil {
		t.Fatalf("orrerytest: opening storage: %v", err)
	}
	cfg := instance.Config{
		Store:  store,
		Engine: opts.Engine,
		Keys:   server.Keys{Master: server.EmulatorKey},
		AAD:    opts.AAD,
		Limits: opts.Limits,

		EnforceThroughput: opts.EnforceThroughput,
		Faults:            opts.Faults,
	}
	if opts.ComputeGateway {
		cfg.ComputeGatewayAddr = "127.0.0.1:0"
	}
	if opts.Metrics {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if opts.TLS {
		cert, _, err := server.LoadOrCreateCertificate("")
		if err != nil {
			store.Close()
			t.Fatalf("orrerytest: %v", err)
		}
		cfg.Certificate = &cert
	}
	inst, err := instance.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("orrerytest: starting the server: %v", err)
	}
	t.Cleanup(func() { inst.Close() })
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		t.Fatalf("orrerytest: %v", err)
	}
	endpoint := inst.Endpoint() // the loopback address by number
	var clientOpts *azcosmos.ClientOptions
	if opts.TLS {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(inst.CertificatePEM)
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		httpClient := &http.Client{Transport: transport}
		t.Cleanup(transport.CloseIdleConnections)
		clientOpts = &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: httpClient}}
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, clientOpts)
	if err != nil {
		t.Fatalf("orrerytest: %v", err)
	}
	return &Server{Endpoint: endpoint, Key: server.EmulatorKey, Client: client, Engine: inst.Engine,
		CertificatePEM: inst.CertificatePEM, Faults: inst.Server.Faults(), clientOpts: clientOpts,
		ComputeGatewayEndpoint: inst.ComputeGatewayEndpoint()}
}

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
