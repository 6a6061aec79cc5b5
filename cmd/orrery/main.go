package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/instance"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/server/explorer"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
	"github.com/orrery-db/orrery/storage/placed"
	"github.com/orrery-db/orrery/storage/postgres"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx := context.Background()
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "cert":
		err = cert(os.Args[2:])
	case "health":
		err = health(os.Args[2:])
	case "import":
		err = importCmd(os.Args[2:])
	case "export":
		err = exportCmd(os.Args[2:])
	case "faults":
		err = faultsCmd(os.Args[2:])
	case "version", "--version", "-v":
		fmt.Println("orrery", version)
	case "help", "--help", "-h":
		usage(os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "orrery: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orrery:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  orrery serve [flags]          run the server (embedded durable storage by default)
  orrery cert [flags]           print the server's TLS certificate as PEM, to trust it
  orrery health [flags]         exit 0 when the server is ready (a container's health check)
  orrery import [flags] FILE    load JSON Lines or a JSON array of items into a container
  orrery export [flags]         write a container's items as JSON Lines or a JSON array
  orrery faults add|list|clear  manage a running server's fault rules
  orrery version                print the version

cert, health, import, export and faults find the server at --endpoint (env
ORRERY_ENDPOINT, default http://localhost:8081/). Run 'orrery serve --help'
for the server's flags.
`)
}

// env returns the environment variable name's value, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", env("ORRERY_ADDR", "localhost:8081"), "address to listen on, HTTPS and HTTP on the same port (env ORRERY_ADDR); localhost is this machine only (127.0.0.1 and ::1), :8081 every interface")
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory (env ORRERY_DATA)")
	blockCache := fs.Int64("block-cache-mb", pebble.DefaultCacheSize>>20, "MiB of table blocks the store in --data keeps in memory for reads, filled as blocks are read, besides its memtables (2 × 16 MiB)")
	walMinSync := fs.Duration("wal-min-sync-interval", 0, "least time between two syncs of the write-ahead log of the store in --data while writes are concurrent: a write arriving sooner after a sync waits for the rest of it, so that more writes share one sync (fewer syncs and less CPU per write, at the cost of latency under concurrent writes; a lone writer is not held back); every write is still answered only once synced (0: sync at once)")
	inMemory := fs.Bool("memory", false, "keep everything in memory: nothing is written to disk")
	postgresURLs := postgresList(env("ORRERY_POSTGRES", ""))
	postgresFromEnv := len(postgresURLs) > 0
	fs.Func("postgres", "keep everything in this PostgreSQL database (a postgres:// URL, which may name a primary and its standbys); several servers on one database act as one. Repeated, the databases share the containers' partition key ranges: the catalog lives in the first, each range in one of them (env ORRERY_POSTGRES: one URL, or several separated by spaces)", func(v string) error {
		if postgresFromEnv {
			postgresURLs, postgresFromEnv = nil, false
		}
		postgresURLs = append(postgresURLs, v)
		return nil
	})
	postgresPool := fs.Int("postgres-pool", 16, "connections to PostgreSQL at most, with --postgres")
	postgresTimeout := fs.Duration("postgres-timeout", postgres.DefaultTimeout, "time PostgreSQL has to answer one round trip (a statement, a page, a commit, a connection); past it the request is answered 503, with --postgres")
	key := fs.String("key", env("ORRERY_KEY", server.EmulatorKey), "master key, base64 (env ORRERY_KEY; default: the emulator's well-known key)")
	readOnlyKey := fs.String("readonly-key", env("ORRERY_READONLY_KEY", ""), "read-only key, base64 (env ORRERY_READONLY_KEY)")
	crossPartition := fs.Bool("serve-cross-partition-queries", false, "execute cross-partition ORDER BY, aggregate, DISTINCT, GROUP BY, TOP and OFFSET queries that the Cosmos gateway refuses to clients without a query plan (the Go SDK)")
	ranges := fs.Int("partition-key-ranges", 1, "partition key ranges a new container gets at least; one per 10,000 RU/s of its throughput when that is more, as in the service")
	queryBudget := fs.Duration("query-time-budget", engine.DefaultQueryTimeBudget, "time one page of a query may run; a streaming page ends early with a continuation, a query evaluated whole is answered 408 (0: unbounded)")
	queryMemory := fs.Int64("query-memory-mb", engine.DefaultQueryMemoryLimit>>20, "memory one query may hold, in MB; past it the query is answered 400 (0: unbounded)")
	queryMemoryTotal := fs.Int64("query-memory-total-mb", engine.DefaultQueryMemoryPool>>20, "memory all running queries may hold together, in MB; a query that finds it taken is answered 429 (0: unbounded)")
	tlsCert := fs.String("tls-cert", env("ORRERY_TLS_CERT", ""), "PEM certificate (chain) to serve instead of the generated one (env ORRERY_TLS_CERT; with --tls-key)")
	tlsKey := fs.String("tls-key", env("ORRERY_TLS_KEY", ""), "PEM private key of --tls-cert (env ORRERY_TLS_KEY)")
	var sans []string
	fs.Func("tls-san", "extra host name or IP address for the generated certificate, e.g. a container's or compose service's name (repeatable)", func(v string) error {
		sans = append(sans, v)
		return nil
	})
	accessLog := fs.Bool("access-log", true, "log one line per request at info level (method, path, status, substatus, duration, charge, activity id)")
	computeGatewayAddr := fs.String("compute-gateway-addr", "", "also serve on this address as the emulator's compute gateway (its port 8903) does: item ids are read from the path as the client encoded them, so ids ending with whitespace or holding '/', '#', a percent-escape or a control character are addressed like any other, where the main port answers 401 or 400 as the service's routing gateway does")
	metricsAddr := fs.String("metrics-addr", env("ORRERY_METRICS_ADDR", ""), "serve Prometheus metrics at /metrics on this address, without authentication (env ORRERY_METRICS_ADDR); without it /metrics on the main port needs the master key as a bearer token")
	seed := fs.String("seed", env("ORRERY_SEED", ""), "JSON file of databases, containers and items to create at start when missing (env ORRERY_SEED)")
	bodyMemory := fs.String("body-memory", env("ORRERY_BODY_MEMORY", strconv.Itoa(server.DefaultBodyMemory>>20)), "MiB that all request bodies in flight may hold together; a request that finds no room within 1 s is answered 429 (env ORRERY_BODY_MEMORY)")
	aadMode := fs.String("aad", env("ORRERY_AAD", ""), "Entra ID (AAD) tokens: off, emulator (any well-formed unexpired JWT) or verify (default: emulator with the emulator's key, verify with --aad-jwks, else off) (env ORRERY_AAD)")
	aadJWKS := fs.String("aad-jwks", env("ORRERY_AAD_JWKS", ""), "JSON Web Key Set file of the identity provider: verify Entra ID tokens' signatures (env ORRERY_AAD_JWKS)")
	aadRoles := fs.String("aad-roles", env("ORRERY_AAD_ROLES", ""), "role assignments file: principals (oid) to Data Reader/Contributor over a scope (env ORRERY_AAD_ROLES)")
	aadIssuer := fs.String("aad-issuer", env("ORRERY_AAD_ISSUER", ""), "accepted token issuers (iss), comma-separated; any when empty (env ORRERY_AAD_ISSUER)")
	aadAudience := fs.String("aad-audience", env("ORRERY_AAD_AUDIENCE", ""), "accepted token audiences besides https://cosmos.azure.com, comma-separated; default: the scheme and host a request is addressed to (env ORRERY_AAD_AUDIENCE)")
	pprofOn := fs.Bool("pprof", false, "serve Go's runtime profiles (net/http/pprof: CPU, heap, allocs, goroutine, trace) at /debug/pprof/ on the main port, to requests carrying the master key as a bearer token (Authorization: Bearer <key>)")
	logLevel := fs.String("log-level", env("ORRERY_LOG_LEVEL", "info"), "log level: debug, info, warn or error")
	faultsFile := fs.String("faults", env("ORRERY_FAULTS", ""), "JSON file of fault rules to install at start (env ORRERY_FAULTS); 'orrery faults' changes them while the server runs")
	enforceThroughput := fs.Bool("enforce-throughput", false, "answer 429 to requests over their container's or shared database's provisioned RU/s, per physical partition, as the service does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ranges < 1 {
		return fmt.Errorf("--partition-key-ranges must be at least 1")
	}
	if *walMinSync < 0 || *walMinSync > time.Second {
		return fmt.Errorf("--wal-min-sync-interval: %v is not a duration from 0 to 1s", *walMinSync)
	}
	if *blockCache < 1 || *blockCache > 1<<20 {
		return fmt.Errorf("--block-cache-mb: %d is not a size in MiB from 1 to %d", *blockCache, 1<<20)
	}
	bodyMiB, err := strconv.ParseInt(*bodyMemory, 10, 64)
	if err != nil || bodyMiB <= 0 || bodyMiB > 1<<20 {
		return fmt.Errorf("--body-memory: %q is not a size in MiB", *bodyMemory)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	// The log, the access log's line per request included, reaches stderr
	// in batches (see batchWriter); serve writes what waits when it returns.
	// The text handler is slog's, whose access log lines the server formats
	// itself (server.NewTextLogHandler).
	logOut := newBatchWriter(os.Stderr)
	defer logOut.Close()
	log := slog.New(server.NewTextLogHandler(logOut, &slog.HandlerOptions{Level: level}))
	keepGCHeadroom(ctx)
	slog.SetDefault(log)

	var store storage.Store
	certDir := *data
	var storageDesc []any // where the data lives, for the ready line
	switch {
	case len(postgresURLs) > 0 && *inMemory:
		return errors.New("--postgres and --memory exclude each other")
	case len(postgresURLs) > 0:
		if *postgresTimeout <= 0 {
			return errors.New("--postgres-timeout must be positive")
		}
		var places []storage.Shared
		var addrs []string
		for _, url := range postgresURLs {
			log.Info("opening storage", "postgres", postgres.Addr(url))
			s, err := openPostgres(log, url, postgres.Options{MaxConns: *postgresPool, Timeout: *postgresTimeout})
			if err != nil {
				for _, p := range places {
					p.Close()
				}
				return err
			}
			places = append(places, s)
			addrs = append(addrs, postgres.Addr(url))
		}
		store, certDir = places[0], ""
		if len(places) > 1 {
			store = placed.New(places...)
		}
		storageDesc = []any{"storage", "postgres", "data", strings.Join(addrs, " ")}
	case *inMemory:
		store, certDir = memory.New(), ""
		storageDesc = []any{"storage", "memory", "data", "none: gone when the server stops (--memory)"}
	default:
		dir, err := filepath.Abs(*data)
		if err != nil {
			return err
		}
		_, statErr := os.Stat(dir)
		fresh := errors.Is(statErr, os.ErrNotExist)
		log.Info("opening storage", "data", dir, "new", fresh)
		s, err := pebble.Open(*data, pebble.Options{CacheSize: *blockCache << 20, WALMinSyncInterval: *walMinSync})
		if err != nil {
			return fmt.Errorf("opening %s: %w", *data, err)
		}
		store = s
		storageDesc = []any{"storage", "pebble", "data", dir}
	}
	aad, err := aadConfig(*aadMode, *aadJWKS, *aadRoles, *aadIssuer, *aadAudience)
	if err != nil {
		store.Close()
		return err
	}
	rules, err := loadFaults(*faultsFile)
	if err != nil {
		store.Close()
		return err
	}
	var certificate tls.Certificate
	switch {
	case (*tlsCert == "") != (*tlsKey == ""):
		err = errors.New("--tls-cert and --tls-key go together")
	case *tlsCert != "":
		if certificate, err = tls.LoadX509KeyPair(*tlsCert, *tlsKey); err != nil {
			err = fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	default:
		var before []byte
		if certDir != "" {
			before, _ = server.ReadCertificate(certDir)
		}
		var certPEM []byte
		if certificate, certPEM, err = server.LoadOrCreateCertificate(certDir, sans...); err != nil {
			err = fmt.Errorf("TLS certificate: %w", err)
		} else if !bytes.Equal(before, certPEM) {
			where := "in memory, new at each start"
			if certDir != "" {
				where = filepath.Join(certDir, server.CertFile)
			}
			log.Info("created a self-signed TLS certificate: clients trust it with the output of `orrery cert`", "file", where)
		}
	}
	if err != nil {
		store.Close()
		return err
	}
	shutdownTracing, tracing, err := startTracing(context.Background())
	if err != nil {
		store.Close()
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(sctx); err != nil {
			log.Warn("flushing traces", "error", err)
		}
	}()
	if tracing {
		log.Info("tracing", "exporter", "otlp/http")
	}
	registry := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := registry.Register(c); err != nil {
			store.Close()
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	cfg := instance.Config{
		Store: store,
		Engine: engine.Options{
			ServeCrossPartitionQueries: *crossPartition,
			PartitionKeyRanges:         *ranges,
			QueryTimeBudget:            nonZero(*queryBudget, -1),
			QueryMemoryLimit:           nonZero(*queryMemory<<20, -1),
			QueryMemoryPool:            nonZero(*queryMemoryTotal<<20, -1),
		},
		Faults:             rules,
		EnforceThroughput:  *enforceThroughput,
		Keys:               server.Keys{Master: *key, ReadOnly: *readOnlyKey},
		AAD:                aad,
		Limits:             server.Limits{BodyMemory: bodyMiB << 20},
		Logger:             log,
		Addr:               *addr,
		ComputeGatewayAddr: *computeGatewayAddr,
		Certificate:        &certificate,
		Metrics:            registry,
		MetricsAddr:        *metricsAddr,
		Trace:              tracing,
		Pprof:              *pprofOn,
	}
	if *accessLog {
		cfg.AccessLog = log
	}
	inst, err := instance.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer inst.Close()
	for _, r := range inst.Server.Faults().List() {
		log.Info("fault rule", "rule", r.String())
	}
	if a := inst.MetricsAddr(); a != nil {
		log.Info("metrics", "addr", a.String())
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *seed != "" {
		log.Info("seeding", "file", *seed)
		sum, err := seedServer(ctx, inst.HTTPEndpoint(), *key, *seed)
		if err != nil {
			return fmt.Errorf("--seed %s: %w", *seed, err)
		}
		log.Info("seeded", "file", *seed, "created", sum.Written, "existing", sum.Skipped)
	}
	announce(log, inst, *addr, *key, aad, storageDesc)

	select {
	case err := <-inst.Served():
		return err
	case <-inst.StorageFailed():
		err := inst.StorageErr()
		log.Error("storage failed: stopping; requests in flight are answered 503. Restart once the data directory is usable", "error", err)
		// A request stuck in the failed store never finishes: wait
		// briefly. The failed store is left open (see Instance.Close).
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		inst.Shutdown(sctx)
		return fmt.Errorf("storage failed: %w", err)
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := inst.Shutdown(sctx); err != nil {
			log.Warn("shutdown", "error", err)
		}
	}
	return nil
}

// announce logs what a user needs once the server is ready: where to point
// a client and the explorer, the key, where the data lives, and what is
// open to whom.
func announce(log *slog.Logger, inst *instance.Instance, addr, key string, aad server.AAD, storageDesc []any) {
	bound := inst.Addr().String()
	endpoint := inst.Endpoint()
	host, _, _ := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	loopbackOnly := host == "localhost" || ip != nil && ip.IsLoopback()
	if host == "localhost" {
		// Spelled as the user did: localhost is both 127.0.0.1 and ::1.
		endpoint = "https://" + net.JoinHostPort("localhost", portOf(bound)) + "/"
	}
	keyDesc := "the emulator's well-known key: " + key
	if key != server.EmulatorKey {
		keyDesc = "the one given with --key or ORRERY_KEY"
	}
	args := []any{"addr", bound, "endpoint", endpoint + " (http:// too, same port)",
		"explorer", endpoint + strings.TrimPrefix(explorer.Prefix, "/"),
		"certificate", endpoint + strings.TrimPrefix(server.CertificatePath, "/"),
		"key", keyDesc}
	args = append(args, storageDesc...)
	args = append(args, "version", version)
	if cgw := inst.ComputeGatewayEndpoint(); cgw != "" {
		args = append(args, "computeGateway", cgw)
	}
	log.Info("orrery ready", args...)
	if loopbackOnly {
		log.Info("listening on this machine's loopback interface only: other machines and containers cannot connect; --addr :" + portOf(bound) + " (or ORRERY_ADDR) listens on every interface")
	} else {
		log.Info("listening on every interface given by --addr " + addr + ": anyone who can reach this port can connect")
	}
	if key == server.EmulatorKey {
		log.Warn("the master key is the emulator's well-known key, which is public: anyone who can connect can read and write everything; set --key (or ORRERY_KEY) for anything but local development")
	}
	if aad.Mode == server.AADEmulator || aad.Mode == server.AADAuto && len(aad.Keys) == 0 && key == server.EmulatorKey {
		log.Warn("Entra ID (AAD) tokens are accepted without verifying their signature, as the emulator does: any well-formed, unexpired JWT gets full data access; --aad off refuses them, --aad-jwks verifies them")
	}
}

// portOf is the port of a host:port address.
func portOf(hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return p
}

// aadConfig builds the Entra ID configuration from the serve flags.
func aadConfig(mode, jwks, roles, issuers, audiences string) (server.AAD, error) {
	var cfg server.AAD
	var err error
	if cfg.Mode, err = server.ParseAADMode(mode); err != nil {
		return cfg, fmt.Errorf("--aad: %w", err)
	}
	if jwks != "" {
		if cfg.Mode == server.AADOff || cfg.Mode == server.AADEmulator {
			return cfg, fmt.Errorf("--aad-jwks verifies tokens: it cannot go with --aad=%s", mode)
		}
		if cfg.Keys, err = server.LoadJWKS(jwks); err != nil {
			return cfg, fmt.Errorf("--aad-jwks: %w", err)
		}
		cfg.Mode = server.AADVerify
	} else if cfg.Mode == server.AADVerify {
		return cfg, errors.New("--aad=verify needs --aad-jwks")
	}
	if roles != "" {
		if cfg.Roles, err = server.LoadRoleAssignments(roles); err != nil {
			return cfg, fmt.Errorf("--aad-roles: %w", err)
		}
	}
	cfg.Issuers = splitList(issuers)
	for _, a := range splitList(audiences) {
		cfg.Audiences = append(cfg.Audiences, strings.TrimSuffix(a, "/"))
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// nonZero returns v, or instead when v is zero: a flag's zero means no
// bound, which the engine's options spell as a negative value (their zero
// is the default).
func nonZero[T int64 | time.Duration](v, instead T) T {
	if v == 0 {
		return instead
	}
	return v
}

// postgresList is the databases ORRERY_POSTGRES names: one URL (or
// keyword/value string), or several postgres:// URLs separated by spaces.
func postgresList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	fields := strings.Fields(v)
	for _, f := range fields {
		if !strings.HasPrefix(f, "postgres://") && !strings.HasPrefix(f, "postgresql://") {
			return []string{v}
		}
	}
	return fields
}

// openPostgres opens the store at url, waiting with backoff while the
// server cannot be reached (not started yet, restarting, failing over), so
// that a gateway may start before its database; it gives up on any other
// error (a refused password, a schema too new) and when signalled.
func openPostgres(log *slog.Logger, url string, opts postgres.Options) (*postgres.Store, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	wait := 250 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		s, err := postgres.Open(octx, url, opts)
		cancel()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		log.Warn(fmt.Sprintf("waiting for PostgreSQL at %s: %v", postgres.Addr(url), err), "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("signalled while waiting for PostgreSQL at %s: %w", postgres.Addr(url), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
