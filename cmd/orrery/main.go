package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "cert":
		err = cert(os.Args[2:])
	case "version", "--version", "-v":
		fmt.Println("orrery", version)
	case "help", "--help", "-h":
		usage(os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "orrery: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
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

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", env("ORRERY_ADDR", ":8081"), "address to listen on, HTTPS and HTTP on the same port (env ORRERY_ADDR)")
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory (env ORRERY_DATA)")
	inMemory := fs.Bool("memory", false, "keep everything in memory: nothing is written to disk")
	key := fs.String("key", env("ORRERY_KEY", server.EmulatorKey), "master key, base64 (env ORRERY_KEY; default: the emulator's well-known key)")
	readOnlyKey := fs.String("readonly-key", env("ORRERY_READONLY_KEY", ""), "read-only key, base64 (env ORRERY_READONLY_KEY)")
	crossPartition := fs.Bool("serve-cross-partition-queries", false, "execute cross-partition ORDER BY, aggregate, DISTINCT, GROUP BY, TOP and OFFSET queries that the Cosmos gateway refuses to clients without a query plan (the Go SDK)")
	aadMode := fs.String("aad", env("ORRERY_AAD", ""), "Entra ID (AAD) tokens: off, emulator (any well-formed unexpired JWT) or verify (default: emulator with the emulator's key, verify with --aad-jwks, else off) (env ORRERY_AAD)")
	aadJWKS := fs.String("aad-jwks", env("ORRERY_AAD_JWKS", ""), "JSON Web Key Set file of the identity provider: verify Entra ID tokens' signatures (env ORRERY_AAD_JWKS)")
	aadRoles := fs.String("aad-roles", env("ORRERY_AAD_ROLES", ""), "role assignments file: principals (oid) to Data Reader/Contributor over a scope (env ORRERY_AAD_ROLES)")
	aadIssuer := fs.String("aad-issuer", env("ORRERY_AAD_ISSUER", ""), "accepted token issuers (iss), comma-separated; any when empty (env ORRERY_AAD_ISSUER)")
	aadAudience := fs.String("aad-audience", env("ORRERY_AAD_AUDIENCE", ""), "accepted token audiences besides https://cosmos.azure.com, comma-separated; default: the scheme and host a request is addressed to (env ORRERY_AAD_AUDIENCE)")
	logLevel := fs.String("log-level", env("ORRERY_LOG_LEVEL", "info"), "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	var store storage.Store
	certDir := *data
	if *inMemory {
		store = memory.New()
		certDir = ""
	} else {
		s, err := pebble.Open(*data, pebble.Options{})
		if err != nil {
			return fmt.Errorf("opening %s: %w", *data, err)
		}
		store = s
	}
	defer store.Close()
	eng, err := engine.Open(store, engine.Options{ServeCrossPartitionQueries: *crossPartition})
	if err != nil {
		return err
	}
	defer eng.Close()
	aad, err := aadConfig(*aadMode, *aadJWKS, *aadRoles, *aadIssuer, *aadAudience)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: server.Keys{Master: *key, ReadOnly: *readOnlyKey}, AAD: aad, Logger: log})
	if err != nil {
		return err
	}
	certificate, _, err := server.LoadOrCreateCertificate(certDir)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	dual := server.NewDualListener(ln, &tls.Config{Certificates: []tls.Certificate{certificate}, MinVersion: tls.VersionTLS12})
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(dual) }()
	storageDesc := "memory"
	if !*inMemory {
		storageDesc = *data
	}
	log.Info("orrery ready", "addr", ln.Addr().String(), "storage", storageDesc, "version", version,
		"endpoint", "https://"+hostPort(ln.Addr())+"/ (http too)")

	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
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

func cert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory holding the certificate (env ORRERY_DATA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, pemBytes, err := server.LoadOrCreateCertificate(*data)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(pemBytes)
	return err
}
