// Package pgtest starts a throwaway PostgreSQL server for tests: one per test
// binary, started at the first call to URL (about two seconds), each test in
// a database of its own, dropped when the test ends. The binaries are
// found on PATH or where Debian's postgresql package puts them; when there
// are none the test is skipped, unless ORRERY_REQUIRE_POSTGRES=1, which
// makes it fail. A package that uses it ends its tests with Run (or calls
// StopShared from a TestMain of its own).
//
// When the test runs as root, the server runs as the postgres user, as
// PostgreSQL refuses to run as root. The shared server runs without fsync
// or synchronous commits: a test database does not outlive its test. A test
// that stops and starts its server (NewServer) gets one of its own, and a
// test of a failover (NewHA) a primary with a synchronous streaming standby.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv is the environment variable that turns a skip for want of
// PostgreSQL into a failure.
const RequireEnv = "ORRERY_REQUIRE_POSTGRES"

var (
	mu      sync.Mutex
	srv     *server
	srvErr  error
	started bool
	dbSeq   atomic.Int64
)

type server struct {
	bin     string // the directory of initdb, pg_ctl and postgres
	dir     string // the temporary directory: data, socket, log
	port    int
	cred    *syscall.Credential
	baseURL string
	opts    string // the server options pg_ctl start passes on
}

// binDir finds the PostgreSQL server binaries.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// A link on PATH leads to the directory of all the binaries
		// (pg_basebackup as well as initdb).
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	// Debian's postgresql package keeps them off PATH, one directory per
	// major version; take the newest.
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool {
		return version(matches[i]) < version(matches[j])
	})
	if len(matches) == 0 {
		return "", errors.New("PostgreSQL is not installed (no initdb on PATH nor in Debian's postgresql package)")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Available reports whether a server can be started, and why not.
func Available() error {
	_, err := binDir()
	return err
}

// Skip skips t, or fails it when RequireEnv is set, when PostgreSQL is
// not installed.
func Skip(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1 but PostgreSQL cannot be used: %v", RequireEnv, err)
	}
	t.Skipf("PostgreSQL cannot be used: %v", err)
}

// URL creates a database for t on the shared server, starting it if need
// be, and returns its connection URL. The database is dropped when t ends;
// close every connection to it first (a cleanup registered after URL runs
// before the drop).
func URL(t testing.TB) string {
	t.Helper()
	s, err := shared()
	if err != nil {
		if errors.Is(err, errNotInstalled) {
			Skip(t, err)
		}
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	return s.createDB(t)
}

// createDB creates a database for t, dropped when t ends.
func (s *server) createDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.baseURL+"postgres")
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.baseURL+"postgres")
		if err != nil {
			t.Errorf("connecting to PostgreSQL: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	return s.baseURL + name
}

var errNotInstalled = errors.New("not installed")

// shared starts the server once per process.
func shared() (*server, error) {
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		srv, srvErr = start(throwaway, "")
	}
	return srv, srvErr
}

// durability is what a server's commits survive.
type durability int

const (
	// throwaway commits may be lost even in a server crash
	// (synchronous_commit off): the shared server, whose databases do not
	// outlive their tests.
	throwaway durability = iota
	// restartable commits survive a server crash or stop, not a machine's
	// (fsync off): a server a test stops and starts.
	restartable
	// durable is PostgreSQL's defaults: commits are on disk.
	durable
)

// start runs initdb and pg_ctl start in a new temporary directory.
func start(mode durability, extra string) (*server, error) {
	s, err := newServer()
	if err != nil {
		return nil, err
	}
	if out, err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := s.launch(mode, extra); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// newServer makes the temporary directory of a server not yet initialized,
// owned by the postgres user when the test runs as root.
func newServer() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotInstalled, err)
	}
	dir, err := os.MkdirTemp("", "orrery-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return s, nil
}

// launch starts the server of an initialized data directory on a free
// port, with the settings of mode and the server options extra.
func (s *server) launch(mode durability, extra string) error {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300", port, s.dir)
		switch mode {
		case throwaway:
			s.opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
		case restartable:
			s.opts += " -c fsync=off -c full_page_writes=off"
		}
		if extra != "" {
			s.opts += " " + extra
		}
		out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", s.opts)
		if err == nil {
			s.port = port
			s.baseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/", port)
			s.watchdog()
			return nil
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return lastErr
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

// watchdog starts a shell, in a session of its own, that stops the server
// and removes its files once this process is gone: a test binary killed
// (a timeout, a panic in a goroutine) before StopShared leaves nothing
// running.
func (s *server) watchdog() {
	script := fmt.Sprintf("while [ -e /proc/%d ]; do sleep 1; done; %q stop -m immediate -D %q >/dev/null 2>&1; rm -rf %q",
		os.Getpid(), filepath.Join(s.bin, "pg_ctl"), s.data(), s.dir)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: no watchdog for the server: %v\n", err)
		return
	}
	go cmd.Wait()
}

func (s *server) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run runs the package's tests (m.Run), then stops the shared server if
// they started it (StopShared), and returns m.Run's exit code, for
// TestMain to exit with: os.Exit(pgtest.Run(m)). A package whose tests
// start the shared server must stop it when they end, or the postmaster
// outlives the test binary (until the watchdog notices, a second or more
// later, or for good if the watchdog could not start).
func Run(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared server, if one was started, and removes its
// files. Call it from TestMain after m.Run.
func StopShared() {
	mu.Lock()
	defer mu.Unlock()
	if srv == nil {
		return
	}
	if out, err := srv.run("pg_ctl", "stop", "-m", "immediate", "-D", srv.data()); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: pg_ctl stop: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	os.RemoveAll(srv.dir)
	srv, started = nil, false
}

// Terminate ends the server sessions with the given process ids, as a
// network fault or a server restart would.
func Terminate(t testing.TB, url string, pids []uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	for _, pid := range pids {
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(pid)); err != nil {
			t.Fatalf("terminating session %d: %v", pid, err)
		}
	}
}

// Server is a PostgreSQL server of one test's own, which it can stop and
// start again (a restart, a lost connection), unlike the shared one. Its
// commits survive a stop in any mode (synchronous_commit is on), though
// not a crash of the machine unless Options.Durable.
type Server struct{ s *server }

// Options tune NewServer.
type Options struct {
	// Durable keeps PostgreSQL's durability settings (fsync,
	// synchronous_commit, full_page_writes on), for benchmarks that compare
	// durable stores; tests leave them off.
	Durable bool
	// Settings are more server settings, name=value each (passed as -c
	// name=value), e.g. shared_preload_libraries=pg_stat_statements for a
	// benchmark that breaks the server's time down by statement.
	Settings []string
}

// NewServer starts a server of t's own (skipping t when PostgreSQL is not
// installed), stopped and removed when t ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if err := Available(); err != nil {
		Skip(t, err)
	}
	mode := restartable
	if opts.Durable {
		mode = durable
	}
	var extra []string
	for _, set := range opts.Settings {
		extra = append(extra, "-c "+set)
	}
	s, err := start(mode, strings.Join(extra, " "))
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		s.run("pg_ctl", "stop", "-m", "immediate", "-D", s.data())
		os.RemoveAll(s.dir)
	})
	return &Server{s: s}
}

// URL creates a database for t on the server and returns its URL, as the
// package's URL does on the shared server.
func (p *Server) URL(t testing.TB) string {
	t.Helper()
	return p.s.createDB(t)
}

// Stop stops the server: mode is pg_ctl's shutdown mode, "fast" (sessions
// are ended, the server checkpoints) or "immediate" (as a crash: recovery
// at the next start).
func (p *Server) Stop(mode string) error {
	if out, err := p.s.run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", p.s.data()); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Start starts the stopped server again, on the same port.
func (p *Server) Start() error {
	if out, err := p.s.run("pg_ctl", "start", "-w", "-t", "60", "-D", p.s.data(), "-l", filepath.Join(p.s.dir, "log"), "-o", p.s.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// Dir is the server's directory: its data, socket and log.
func (p *Server) Dir() string { return p.s.dir }

// TableLock is a session of a test's own holding orrery_kv locked, so that
// every statement on the table waits, as behind a long migration.
type TableLock struct {
	t       testing.TB
	blocker *pgx.Conn
	watcher *pgx.Conn
}

// LockTable locks the orrery_kv table of the database at url until
// Release (or the end of t).
func LockTable(t testing.TB, url string) *TableLock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := &TableLock{t: t}
	var err error
	if l.blocker, err = pgx.Connect(ctx, url); err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	t.Cleanup(func() { l.blocker.Close(context.Background()) })
	if l.watcher, err = pgx.Connect(ctx, url); err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	t.Cleanup(func() { l.watcher.Close(context.Background()) })
	if _, err := l.blocker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.blocker.Exec(ctx, "LOCK TABLE orrery_kv IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return l
}

// Waiters is the number of the database's sessions waiting on a lock.
func (l *TableLock) Waiters() int {
	l.t.Helper()
	var n int
	if err := l.watcher.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
		l.t.Fatal(err)
	}
	return n
}

// Release lets the waiting statements go on.
func (l *TableLock) Release() {
	l.t.Helper()
	if _, err := l.blocker.Exec(context.Background(), "ROLLBACK"); err != nil {
		l.t.Fatal(err)
	}
}
