package instance

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/server/h1serve"
	"github.com/orrery-db/orrery/storage"
)

// Config configures an instance. Only Store is required.
type Config struct {
	// Store holds the data. The instance owns it from Start on: Close
	// closes it after the engine, and Start closes it when it fails.
	Store storage.Store
	// Engine configures the engine; its Logger defaults to Logger.
	Engine engine.Options

	// Keys are the account's keys; an empty Master is the emulator's
	// well-known key (server.EmulatorKey).
	Keys server.Keys
	// AAD, Limits, Now and EnforceThroughput configure the server (see
	// server.Config).
	AAD               server.AAD
	Limits            server.Limits
	Now               func() time.Time
	EnforceThroughput bool
	// Faults are fault rules installed before the instance serves (see
	// package faults); Server.Faults() changes them later.
	Faults []faults.Rule
	// Logger gets the server's and the engine's logs; nil discards them.
	Logger *slog.Logger

	// Listener, when set, is where the instance serves; else it listens on
	// Addr, and on a free loopback port when Addr is empty too.
	Listener net.Listener
	Addr     string
	// ComputeGatewayAddr, when set, is a second address where the instance
	// serves as the emulator's compute gateway does (see
	// server.Server.ComputeGateway), with the same certificate, without
	// the metrics, access log and spans of the main port.
	ComputeGatewayAddr string
	// Certificate, when set, is served over HTTPS on the same port as
	// plain HTTP (server.NewDualListener) and at server.CertificatePath;
	// without it the instance serves plain HTTP only.
	Certificate *tls.Certificate

	// Metrics, when set, receives the request metrics and the engine's
	// (and the store's, when it is a prometheus.Collector); the caller may
	// have registered others (Go's, the process's). They are served at
	// /metrics on the main port behind the master key as a bearer token,
	// or, with MetricsAddr, on a listener of their own without
	// authentication.
	Metrics     *prometheus.Registry
	MetricsAddr string
	// AccessLog, when set, gets one info line per request.
	AccessLog *slog.Logger
	// Pprof serves Go's runtime profiles (CPU, heap, allocations,
	// goroutines, execution trace) at server.PprofPrefix on the main port,
	// behind the master key as a bearer token.
	Pprof bool
	// Trace makes a span of each request, continuing the caller's trace
	// context, with the global OpenTelemetry tracer provider (set up by the
	// caller); without it a request pays nothing for tracing.
	Trace bool
}

// Instance is a running store, engine and server.
type Instance struct {
	// Engine is the instance's engine, for callers that look beneath the
	// API (tests, metrics).
	Engine *engine.Engine
	// Server is the REST API's handler, without the metrics and access log
	// around it (Handler has them).
	Server *server.Server
	// CertificatePEM is the certificate served over HTTPS; nil without TLS.
	CertificatePEM []byte

	store   storage.Store
	handler http.Handler
	hs      *h1serve.Server // the API port's server (net/http's semantics, less work per request)
	ln      net.Listener
	metrics *http.Server
	mln     net.Listener
	cgw     *http.Server
	cgwln   net.Listener
	// handlers is read-held by every request in flight: Close takes it to
	// wait for them, and sets closed under it.
	handlers  sync.RWMutex
	closed    bool
	served    chan error
	closeOnce sync.Once
	closeErr  error
}

// Start opens the engine on cfg.Store, builds the server and serves it. On
// error everything it opened is closed again, cfg.Store and cfg.Listener
// included.
func Start(ctx context.Context, cfg Config) (inst *Instance, err error) {
	if cfg.Store == nil {
		return nil, errors.New("instance: no store")
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	undo = append(undo, func() { cfg.Store.Close() })
	if cfg.Listener != nil {
		undo = append(undo, func() { cfg.Listener.Close() })
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Keys.Master == "" {
		cfg.Keys.Master = server.EmulatorKey
	}
	// The undo functions use locals: inst is nil once an error returns.
	inst = &Instance{store: cfg.Store, served: make(chan error, 1)}
	var certPEM []byte
	if cfg.Certificate != nil {
		if certPEM, err = certificatePEM(cfg.Certificate); err != nil {
			return nil, err
		}
		inst.CertificatePEM = certPEM
	}

	opts := cfg.Engine
	if opts.Logger == nil {
		opts.Logger = log
	}
	eng, err := engine.Open(ctx, cfg.Store, opts)
	if err != nil {
		return nil, err
	}
	inst.Engine = eng
	undo = append(undo, func() { eng.Close() })
	if inst.Server, err = server.New(server.Config{Engine: inst.Engine, Keys: cfg.Keys, AAD: cfg.AAD, Logger: log,
		Now: cfg.Now, Limits: cfg.Limits, CertificatePEM: certPEM, EnforceThroughput: cfg.EnforceThroughput}); err != nil {
		return nil, err
	}
	if len(cfg.Faults) > 0 {
		if _, err := inst.Server.Faults().Add(cfg.Faults...); err != nil {
			return nil, fmt.Errorf("fault rules: %w", err)
		}
	}
	inst.handler = inst.Server
	if cfg.Metrics != nil || cfg.AccessLog != nil || cfg.Trace || cfg.Pprof {
		observe := server.ObserveOptions{AccessLog: cfg.AccessLog, Trace: cfg.Trace}
		if cfg.Pprof {
			observe.PprofKey = cfg.Keys.Master
		}
		if cfg.Metrics != nil {
			collectors := []prometheus.Collector{server.NewEngineCollector(inst.Engine), server.NewFaultCollector(inst.Server)}
			if c, ok := cfg.Store.(prometheus.Collector); ok {
				collectors = append(collectors, c)
			}
			for _, c := range collectors {
				if err := cfg.Metrics.Register(c); err != nil {
					return nil, fmt.Errorf("instance: registering metrics: %w", err)
				}
			}
			observe.Registerer = cfg.Metrics
			if cfg.MetricsAddr == "" {
				observe.Gatherer, observe.MetricsKey = cfg.Metrics, cfg.Keys.Master
			}
		}
		if inst.handler, err = server.Observe(inst.Server, observe); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics != nil && cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		inst.mln = mln
		undo = append(undo, func() { mln.Close() })
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
		inst.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}

	ln := cfg.Listener
	if ln == nil {
		addr := cfg.Addr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		if ln, err = Listen(addr); err != nil {
			return nil, err
		}
		undo = append(undo, func() { ln.Close() })
	}
	if cfg.Certificate != nil {
		ln = server.NewDualListener(ln, &tls.Config{Certificates: []tls.Certificate{*cfg.Certificate}, MinVersion: tls.VersionTLS12})
	}
	ln = inst.Server.Listener(ln)
	inst.ln = ln
	if cfg.ComputeGatewayAddr != "" {
		cln, err := Listen(cfg.ComputeGatewayAddr)
		if err != nil {
			return nil, fmt.Errorf("compute gateway: %w", err)
		}
		undo = append(undo, func() { cln.Close() })
		if cfg.Certificate != nil {
			cln = server.NewDualListener(cln, &tls.Config{Certificates: []tls.Certificate{*cfg.Certificate}, MinVersion: tls.VersionTLS12})
		}
		inst.cgwln = inst.Server.Listener(cln)
		inst.cgw = inst.Server.HTTPServer()
		inst.cgw.Handler = inst.guard(inst.Server.ComputeGateway())
	}
	hs := inst.Server.HTTPServer()
	hs.Handler = inst.guard(inst.handler)
	if inst.hs, err = h1serve.New(hs); err != nil {
		return nil, err
	}
	go func() {
		err := inst.hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		inst.served <- err
	}()
	if inst.cgw != nil {
		go inst.cgw.Serve(inst.cgwln)
	}
	if inst.metrics != nil {
		go inst.metrics.Serve(inst.mln)
	}
	return inst, nil
}

// guard serves handler while the instance is open. Close waits for the
// handlers it interrupts, so that none runs on a closed engine.
func (i *Instance) guard(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.handlers.RLock()
		defer i.handlers.RUnlock()
		if i.closed {
			w.Header().Set("Connection", "close")
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	})
}

// certificatePEM encodes the chain of c as PEM.
func certificatePEM(c *tls.Certificate) ([]byte, error) {
	if len(c.Certificate) == 0 {
		return nil, errors.New("instance: the TLS certificate is empty")
	}
	var out []byte
	for _, der := range c.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out, nil
}

// Addr is the address the instance listens on.
func (i *Instance) Addr() net.Addr { return i.ln.Addr() }

// MetricsAddr is the address of the metrics listener; nil without one.
func (i *Instance) MetricsAddr() net.Addr {
	if i.mln == nil {
		return nil
	}
	return i.mln.Addr()
}

// Endpoint is the URL clients use: https when the instance has a
// certificate (plain http answers on the same port), a wildcard address
// (all interfaces) spelled as localhost.
func (i *Instance) Endpoint() string {
	scheme := "http"
	if i.CertificatePEM != nil {
		scheme = "https"
	}
	return scheme + "://" + HostPort(i.ln.Addr()) + "/"
}

// ComputeGatewayEndpoint is the URL of the compute gateway (see
// Config.ComputeGatewayAddr), in the scheme of Endpoint; "" without one.
func (i *Instance) ComputeGatewayEndpoint() string {
	if i.cgwln == nil {
		return ""
	}
	scheme := "http"
	if i.CertificatePEM != nil {
		scheme = "https"
	}
	return scheme + "://" + HostPort(i.cgwln.Addr()) + "/"
}

// HTTPEndpoint is the plain-HTTP URL of the instance (the same port as
// Endpoint's).
func (i *Instance) HTTPEndpoint() string { return "http://" + HostPort(i.ln.Addr()) + "/" }

// HostPort spells a listening address as clients dial it: a wildcard host
// (all interfaces) as localhost.
func HostPort(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// Served delivers, once, the error that stopped serving: nil after Shutdown
// or Close, else what the listener failed with.
func (i *Instance) Served() <-chan error { return i.served }

// StorageFailed is closed when the store fails beyond repair (a Pebble
// store whose directory was removed, say); nil for stores that cannot. The
// server then answers 503 and the caller should stop: Shutdown and Close
// leave a failed store and its engine open, since a task stuck in it may
// never return.
func (i *Instance) StorageFailed() <-chan struct{} {
	if f, ok := i.store.(failer); ok {
		return f.Failed()
	}
	return nil
}

// StorageErr is why the store failed; nil while it has not.
func (i *Instance) StorageErr() error {
	if f, ok := i.store.(failer); ok {
		return f.Err()
	}
	return nil
}

// failer is a store that can fail for good (storage/pebble).
type failer interface {
	Failed() <-chan struct{}
	Err() error
}

func (i *Instance) failed() bool {
	ch := i.StorageFailed()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Shutdown stops accepting, lets the requests in flight finish until ctx
// ends, then closes what is left as Close does.
func (i *Instance) Shutdown(ctx context.Context) error {
	err := i.hs.Shutdown(ctx)
	if i.cgw != nil {
		if cerr := i.cgw.Shutdown(ctx); err == nil {
			err = cerr
		}
	}
	if cerr := i.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close stops serving at once: it closes the listeners and connections,
// waits for the handlers they interrupted, and closes the engine and the
// store (unless the store failed; see StorageFailed). It may be called
// more than once.
func (i *Instance) Close() error {
	i.closeOnce.Do(func() {
		i.hs.Close()
		if i.cgw != nil {
			i.cgw.Close()
		}
		if i.metrics != nil {
			i.metrics.Close()
		}
		i.handlers.Lock()
		i.closed = true
		i.handlers.Unlock()
		if i.failed() {
			return
		}
		i.Engine.Close()
		i.closeErr = i.store.Close()
	})
	return i.closeErr
}
