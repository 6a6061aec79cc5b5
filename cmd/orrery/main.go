package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
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
  orrery serve [flags]   run the server (embedded durable storage by default)
  orrery cert [flags]    print the server's self-signed TLS certificate as PEM
  orrery import [flags] FILE   load JSON Lines or a JSON array of items into a container
  orrery export [flags]  write a container's items as JSON Lines or a JSON array
  orrery faults add|list|clear  manage a running server's fault rules
  orrery version         print the version

Run 'orrery serve --help' for the server's flags.
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
	addr := fs.String("addr", env("ORRERY_ADDR", ":8081"), "address to listen on, HTTPS and HTTP on the same port (env ORRERY_ADDR)")
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory (env ORRERY_DATA)")
	inMemory := fs.Bool("memory", false, "keep everything in memory: nothing is written to disk")
	postgresURL := fs.String("postgres", env("ORRERY_POSTGRES", ""), "keep everything in this PostgreSQL database (a postgres:// URL); several servers on one database act as one (env ORRERY_POSTGRES)")
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
	metricsAddr := fs.String("metrics-addr", env("ORRERY_METRICS_ADDR", ""), "serve Prometheus metrics at /metrics on this address, without authentication (env ORRERY_METRICS_ADDR); without it /metrics on the main port needs the master key as a bearer token")
	seed := fs.String("seed", env("ORRERY_SEED", ""), "JSON file of databases, containers and items to create at start when missing (env ORRERY_SEED)")
	bodyMemory := fs.String("body-memory", env("ORRERY_BODY_MEMORY", strconv.Itoa(server.DefaultBodyMemory>>20)), "MiB that all request bodies in flight may hold together; a request that finds no room within 1 s is answered 429 (env ORRERY_BODY_MEMORY)")
	aadMode := fs.String("aad", env("ORRERY_AAD", ""), "Entra ID (AAD) tokens: off, emulator (any well-formed unexpired JWT) or verify (default: emulator with the emulator's key, verify with --aad-jwks, else off) (env ORRERY_AAD)")
	aadJWKS := fs.String("aad-jwks", env("ORRERY_AAD_JWKS", ""), "JSON Web Key Set file of the identity provider: verify Entra ID tokens' signatures (env ORRERY_AAD_JWKS)")
	aadRoles := fs.String("aad-roles", env("ORRERY_AAD_ROLES", ""), "role assignments file: principals (oid) to Data Reader/Contributor over a scope (env ORRERY_AAD_ROLES)")
	aadIssuer := fs.String("aad-issuer", env("ORRERY_AAD_ISSUER", ""), "accepted token issuers (iss), comma-separated; any when empty (env ORRERY_AAD_ISSUER)")
	aadAudience := fs.String("aad-audience", env("ORRERY_AAD_AUDIENCE", ""), "accepted token audiences besides https://cosmos.azure.com, comma-separated; default: the scheme and host a request is addressed to (env ORRERY_AAD_AUDIENCE)")
	logLevel := fs.String("log-level", env("ORRERY_LOG_LEVEL", "info"), "log level: debug, info, warn or error")
	faultsFile := fs.String("faults", env("ORRERY_FAULTS", ""), "JSON file of fault rules to install at start (env ORRERY_FAULTS); 'orrery faults' changes them while the server runs")
	enforceThroughput := fs.Bool("enforce-throughput", false, "answer 429 to requests over their container's or shared database's provisioned RU/s, per physical partition, as the service does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ranges < 1 {
		return fmt.Errorf("--partition-key-ranges must be at least 1")
	}
	bodyMiB, err := strconv.ParseInt(*bodyMemory, 10, 64)
	if err != nil || bodyMiB <= 0 || bodyMiB > 1<<20 {
		return fmt.Errorf("--body-memory: %q is not a size in MiB", *bodyMemory)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	var store storage.Store
	// storageFailed is closed when durable storage fails beyond repair
	// (never for memory); the server then stops without closing it.
	var storageFailed <-chan struct{}
	var storageErr func() error
	certDir := *data
	switch {
	case *postgresURL != "" && *inMemory:
		return errors.New("--postgres and --memory exclude each other")
	case *postgresURL != "":
		if *postgresTimeout <= 0 {
			return errors.New("--postgres-timeout must be positive")
		}
		s, err := openPostgres(log, *postgresURL, postgres.Options{MaxConns: *postgresPool, Timeout: *postgresTimeout})
		if err != nil {
			return err
		}
		store = s
		certDir = ""
	case *inMemory:
		store = memory.New()
		certDir = ""
	default:
		s, err := pebble.Open(*data, pebble.Options{})
		if err != nil {
			return fmt.Errorf("opening %s: %w", *data, err)
		}
		store, storageFailed, storageErr = s, s.Failed(), s.Err
	}
	failed := false
	defer func() {
		if !failed {
			store.Close()
		}
	}()
	eng, err := engine.Open(ctx, store, engine.Options{
		ServeCrossPartitionQueries: *crossPartition,
		PartitionKeyRanges:         *ranges,
		QueryTimeBudget:            nonZero(*queryBudget, -1),
		QueryMemoryLimit:           nonZero(*queryMemory<<20, -1),
		QueryMemoryPool:            nonZero(*queryMemoryTotal<<20, -1),
		Logger:                     log,
	})
	if err != nil {
		return err
	}
	defer func() {
		// A failed store may hold a background task for good.
		if !failed {
			eng.Close()
		}
	}()
	aad, err := aadConfig(*aadMode, *aadJWKS, *aadRoles, *aadIssuer, *aadAudience)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: server.Keys{Master: *key, ReadOnly: *readOnlyKey}, AAD: aad, Logger: log,
		Limits: server.Limits{BodyMemory: bodyMiB << 20}, EnforceThroughput: *enforceThroughput})
	if err != nil {
		return err
	}
	if err := installFaults(srv, *faultsFile, log); err != nil {
		return err
	}
	var certificate tls.Certificate
	switch {
	case (*tlsCert == "") != (*tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case *tlsCert != "":
		if certificate, err = tls.LoadX509KeyPair(*tlsCert, *tlsKey); err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	default:
		if certificate, _, err = server.LoadOrCreateCertificate(certDir, sans...); err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	dual := server.NewDualListener(ln, &tls.Config{Certificates: []tls.Certificate{certificate}, MinVersion: tls.VersionTLS12})
	shutdownTracing, tracing, err := startTracing(context.Background())
	if err != nil {
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
	metrics := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		server.NewEngineCollector(eng), server.NewFaultCollector(srv)}
	if c, ok := store.(prometheus.Collector); ok {
		metrics = append(metrics, c)
	}
	for _, c := range metrics {
		if err := registry.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	observe := server.ObserveOptions{Registerer: registry, Gatherer: registry, MetricsKey: *key}
	if *accessLog {
		observe.AccessLog = log
	}
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		observe.Gatherer = nil
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go ms.Serve(mln)
		defer ms.Close()
		log.Info("metrics", "addr", mln.Addr().String())
	}
	hs := srv.HTTPServer()
	if hs.Handler, err = server.Observe(srv, observe); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(dual) }()
	if *seed != "" {
		sum, err := seedServer(ctx, "http://"+hostPort(ln.Addr())+"/", *key, *seed)
		if err != nil {
			_ = hs.Close()
			return fmt.Errorf("--seed %s: %w", *seed, err)
		}
		log.Info("seeded", "file", *seed, "created", sum.Written, "existing", sum.Skipped)
	}
	storageDesc := "memory"
	switch {
	case *postgresURL != "":
		storageDesc = "postgres"
	case !*inMemory:
		storageDesc = *data
	}
	log.Info("orrery ready", "addr", ln.Addr().String(), "storage", storageDesc, "version", version,
		"endpoint", "https://"+hostPort(ln.Addr())+"/ (http too)")

	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-storageFailed:
		failed = true
		err := storageErr()
		log.Error("storage failed: stopping; requests in flight are answered 503. Restart once the data directory is usable", "error", err)
		// A request stuck in the failed store never finishes: wait briefly.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		return fmt.Errorf("storage failed: %w", err)
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			log.Warn("shutdown", "error", err)
		}
	}
	return nil
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

func hostPort(a net.Addr) string {
	s := a.String()
	if strings.HasPrefix(s, "[::]:") || strings.HasPrefix(s, "0.0.0.0:") {
		return "localhost:" + s[strings.LastIndex(s, ":")+1:]
	}
	return s
}

// cert prints the certificate a server serves: asked of the running server
// at --endpoint, or read from --data when none answers. It creates nothing.
func cert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	endpoint := fs.String("endpoint", env("ORRERY_ADDR", "localhost:8081"), "address of a running server to ask (env ORRERY_ADDR)")
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory holding the certificate, read when no server answers (env ORRERY_DATA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pemBytes, askErr := servedCertificate(*endpoint)
	if askErr != nil {
		var err error
		if pemBytes, err = server.ReadCertificate(*data); err != nil {
			return fmt.Errorf("no server answered at %s (%v) and %s holds no certificate (%v)", *endpoint, askErr, *data, err)
		}
	}
	_, err := os.Stdout.Write(pemBytes)
	return err
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

// servedCertificate asks a server for its certificate chain, as PEM.
func servedCertificate(endpoint string) ([]byte, error) {
	hostport := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(endpoint, "https://"), "http://"), "/")
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "8081")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", hostport, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []byte
	for _, c := range conn.ConnectionState().PeerCertificates {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out, nil
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
