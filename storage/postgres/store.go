package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/btree"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orrery-db/orrery/storage"
)

// SchemaVersion is the version of the tables this package reads and writes.
// Open upgrades an older database to it and refuses a newer one.
const SchemaVersion = 1

// pageSize is the number of rows an iterator reads per round trip: its
// memory is bounded by this many keys and values.
const pageSize = 256

// lockClass is the first half of the two-part advisory-lock keys this
// package takes (schema migration, duties); batch locks use one-part keys,
// which PostgreSQL keeps apart from two-part ones.
const lockClass = 0x4f5252 // "ORR"

const (
	lockObjSchema = 1 // serializes schema creation and migration
	// lockClassLead is the first half of a duty's key; the second half is
	// a hash of the duty's name.
	lockClassLead = lockClass + 1
)

// Options tune Open.
type Options struct {
	// MaxConns caps the connection pool; zero means 16, and less than 4
	// means 4. Every open snapshot, shared batch and iterator over more
	// than a page (until it is read to its end) holds one connection; a quarter of the pool (at least two) is
	// kept for short reads, so snapshots and shared batches wait for one
	// another before the pool is full.
	MaxConns int
	// Timeout bounds each round trip to the server: a statement, a page of
	// an iterator, a commit, a connection attempt (unless the URL sets
	// connect_timeout). A silent server (a network partition that drops
	// packets) then answers storage.ErrUnavailable in bounded time instead
	// of when TCP gives up. Zero means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout's default: far above any statement this
// package sends (each reads or writes a page or a batch by primary key),
// short enough that a request does not hang on a silent server.
const DefaultTimeout = 15 * time.Second

// errNoAnswer is the cause of an operation's context when the server did
// not answer within the timeout.
var errNoAnswer = errors.New("no answer from PostgreSQL in time")

// Store is a storage.Store and storage.Shared on a PostgreSQL database. It
// is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	timeout  time.Duration
	connCfg  *pgx.ConnConfig // for the dedicated connections of duties
	closed   atomic.Bool
	leadsMu  sync.Mutex
	leads    map[*lead]struct{}
	closeCtx context.Context
	cancel   context.CancelFunc
	// conns is the pool's connections, which Close interrupts.
	// Round trips that keep their timeout with their connection's deadline
	// (onConn) set it under connsMu read-locked, interrupt under it locked.
	connsMu sync.RWMutex
	conns   map[*pgx.Conn]*connState
	// lingering is the connections of closed snapshots waiting, in their
	// transactions, for the next snapshot (see lingerFor).
	lingering lingering
	// slots bounds the connections that shared batches and snapshots hold
	// for their lifetime, leaving the rest of the pool to the short reads
	// (point reads, first pages, watermarks) that a holder may make while
	// it holds one: a full pool never waits on itself.
	slots chan struct{}
	// reads coalesces point reads beyond a few round trips in flight.
	reads readGroups
}

var (
	_ storage.Store  = (*Store)(nil)
	_ storage.Shared = (*Store)(nil)
)

// sessionSQL is run on each of the pool's connections as it opens. Every
// statement the store prepares reads or writes orrery_kv by its primary
// key, whatever its parameters, so each is planned once per connection,
// not at each execution: left to choose, PostgreSQL plans a statement
// over an array parameter (a point read's keys and watermark, a write's
// reads and deletes) anew each time, since the plan for the array it was
// given always looks cheaper than one for any array (a point read: ~125
// µs of the server's CPU planned each time, ~40 planned once, at one
// client). A plan made once must not scan the table: made while the table
// was small, it would be kept as the table grows, so sequential scans are
// off (each statement then uses the primary key's index, as it does on a
// large table). So are bitmap scans: the generic plan of a read or delete
// of the keys of an array (a write's key read, its deletes) would be one,
// building a bitmap of the rows to then visit them, which for the few keys
// of a write costs the server about three times the execution of an index
// scan over the same rows (the same eight buffers for two keys).
const sessionSQL = `SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_bitmapscan = off`

// Open connects to the database at url (a PostgreSQL connection URL or
// key=value string), creates or migrates the schema, and returns the store.
// If the server cannot be reached, the error is storage.ErrUnavailable.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = 16
	if opts.MaxConns > 0 {
		if opts.MaxConns < 4 {
			opts.MaxConns = 4 // a slot for batches and snapshots, and the reserve
		}
		cfg.MaxConns = int32(opts.MaxConns)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	// The pool pings a connection idle for a while before handing it out:
	// on a silent server the ping, too, ends within the timeout (onConn
	// acquires under its caller's context).
	cfg.PingTimeout = timeout
	// Keepalive probes find a server gone silent while a connection idles
	// in the pool or waits on a lock; the default waits minutes to probe.
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true,
		Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	if wrapConn != nil {
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrapConn(c), nil
		}
	}
	reserve := max(2, int(cfg.MaxConns)/4)
	s := &Store{timeout: timeout, connCfg: cfg.ConnConfig.Copy(), leads: map[*lead]struct{}{},
		conns: map[*pgx.Conn]*connState{}, slots: make(chan struct{}, max(1, int(cfg.MaxConns)-reserve)),
		lingering: lingering{lingerFor: lingerFor, more: make(chan struct{}, 1)}, reads: newReadGroups()}
	s.closeCtx, s.cancel = context.WithCancel(context.Background())
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn.TypeMap())
		if _, err := conn.PgConn().Exec(ctx, sessionSQL).ReadAll(); err != nil {
			return err
		}
		s.connsMu.Lock()
		defer s.connsMu.Unlock()
		if s.closed.Load() {
			return storage.ErrClosed
		}
		nc := conn.PgConn().Conn()
		s.conns[conn] = &connState{interrupt: func() { s.setDeadline(nc, time.Unix(1, 0)) }}
		return nil
	}
	cfg.BeforeClose = func(conn *pgx.Conn) {
		s.connsMu.Lock()
		delete(s.conns, conn)
		s.connsMu.Unlock()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.pool = pool
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		if unreachable(err) {
			// The server is down, starting or out of reach: a caller may
			// wait for it and try again.
			return nil, fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
		}
		return nil, err
	}
	return s, nil
}

// wrapConn, when set (by this package's tests, before Open), wraps each
// connection the pool dials.
var wrapConn func(net.Conn) net.Conn

// Addr is the host:port (or socket) that url connects to, for messages; it
// is url itself if url does not parse.
func Addr(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return url
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
}

// migrations[i] brings a database at version i to version i+1.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS orrery_kv (k bytea PRIMARY KEY, v bytea NOT NULL)`,
}

// migrate creates the schema or brings it up to SchemaVersion, under a lock
// so that processes opening the database at once do it once.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClass, lockObjSchema); err != nil {
		return fmt.Errorf("postgres: locking the schema: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS orrery_meta (name text PRIMARY KEY, value text NOT NULL)`); err != nil {
		return fmt.Errorf("postgres: creating orrery_meta: %w", err)
	}
	version := 0
	var text string
	err = tx.QueryRow(ctx, `SELECT value FROM orrery_meta WHERE name = 'schema_version'`).Scan(&text)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("postgres: reading the schema version: %w", err)
	default:
		if _, err := fmt.Sscan(text, &version); err != nil {
			return fmt.Errorf("postgres: schema version %q is not a number", text)
		}
	}
	if version > SchemaVersion {
		return fmt.Errorf("postgres: the database has schema version %d, newer than %d, the newest this build understands: upgrade orrery", version, SchemaVersion)
	}
	if version == SchemaVersion {
		return nil
	}
	for _, m := range migrations[version:SchemaVersion] {
		if _, err := tx.Exec(ctx, m); err != nil {
			return fmt.Errorf("postgres: migrating the schema: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orrery_meta (name, value) VALUES ('schema_version', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, fmt.Sprint(SchemaVersion)); err != nil {
		return fmt.Errorf("postgres: recording the schema version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// timed runs f, one round trip or a few, under a context derived from
// parent that ends after the store's timeout (Close ends it too, by
// failing its connection's reads and writes: see interrupt). If the timeout ended it, the
// error is storage.ErrUnavailable: the server did not answer, and whatever
// f sent may or may not have taken effect (for a commit, the caller answers
// 503, an unknown outcome, and never acknowledges it). Other errors are
// returned as they are, for the caller to wrap.
func (s *Store) timed(parent context.Context, f func(ctx context.Context) error) error {
	if err := parent.Err(); err != nil {
		return &callerGone{err: err}
	}
	ctx, cancel := context.WithTimeoutCause(parent, s.timeout, errNoAnswer)
	defer cancel()
	err := f(ctx)
	return s.outcome(parent, err, errors.Is(context.Cause(ctx), errNoAnswer))
}

// outcome is the error of a call under the store's timeout that returned
// err: unchanged, or callerGone when parent ended, or
// storage.ErrUnavailable when timedOut.
func (s *Store) outcome(parent context.Context, err error, timedOut bool) error {
	if err == nil || s.closed.Load() || errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if perr := parent.Err(); perr != nil {
		return &callerGone{err: perr, during: err}
	}
	if timedOut {
		return fmt.Errorf("postgres: %w: %w within %v (%w)", storage.ErrUnavailable, errNoAnswer, s.timeout, err)
	}
	return err
}

// onConn is timed for the round trips of the paths every request takes
// (a point read, a write's two round trips) on conn, which it takes from
// the pool first when *conn is nil: the store's timeout is kept by the
// connection's own deadline, set before f and cleared after, not by a
// context of its own (a timer, a context and the driver's watch of it,
// per round trip). A caller that goes away ends the round trip at once:
// its deadline is moved to the past and the connection closed. The pool's wait
// for a connection is bounded by the others' round trips, its dial by
// the connect timeout and its ping by PingTimeout, all the store's
// timeout.
//
// With h not nil (a shared batch's round trips, on the connection it
// holds), what they keep on the connection is kept from one to the next
// in *h, and ended by releaseHeld before the connection goes back to the
// pool: the deadline, which a round trip moves only when less than
// heldDeadlineMin of the timeout is left (so each still ends within the
// timeout, after at least that much of it), and the watch of the
// caller's context, registered by the first round trip and kept while
// the later ones come with a context done with it (the same, or one
// derived by a value); one with another context ends it and watches its
// own. A write's two round trips then change the deadline twice, not
// four times (each a timer's), and register one watch, not two.
func (s *Store) onConn(parent context.Context, conn **pgxpool.Conn, h *held, f func(ctx context.Context, c *pgx.Conn) error) error {
	if err := parent.Err(); err != nil {
		return &callerGone{err: err}
	}
	if *conn == nil {
		c, err := s.pool.Acquire(parent)
		if err != nil {
			return s.outcome(parent, err, false)
		}
		*conn = c
	}
	c := (*conn).Conn()
	nc := c.PgConn().Conn()
	if h != nil && h.stop != nil && h.done != parent.Done() {
		// Another caller's round trip: the held watch is of a context
		// that governs it no more (it may end now without ending this
		// one).
		h.endWatch()
	}
	now := time.Now()
	var interrupt func() // the connection's own (see connState), if any
	if h == nil {
		var ok bool
		if interrupt, ok = s.armDeadline(c, nc, now.Add(s.timeout)); !ok {
			return storage.ErrClosed
		}
	} else if h.deadline.Sub(now) < s.timeout*heldDeadlineMin/8 {
		d := now.Add(s.timeout)
		if !s.setDeadline(nc, d) {
			return storage.ErrClosed
		}
		h.deadline = d
	}
	// The caller going away ends the round trip at once: the deadline,
	// moved to the past, fails its write or read (and the connection is
	// closed, its protocol state unknown).
	var stop func() bool
	if parent.Done() != nil {
		if h == nil {
			if interrupt == nil {
				interrupt = func() { s.setDeadline(nc, time.Unix(1, 0)) }
			}
			stop = context.AfterFunc(parent, interrupt)
		} else if h.stop == nil {
			h.moving.Add(1)
			h.done, h.stop = parent.Done(), context.AfterFunc(parent, func() {
				s.setDeadline(nc, time.Unix(1, 0))
				h.moving.Done()
			})
		}
	}
	if h != nil && h.stop != nil && parent.Err() != nil {
		// Gone since the check above: the held watch may have moved
		// the deadline before it was set again here. Nothing was sent;
		// releaseHeld closes the connection.
		return &callerGone{err: parent.Err()}
	}
	err := f(parent, c)
	if stop != nil && !stop() {
		// Gone during or just after f: if f had read every answer the
		// connection is sound, but its deadline is being moved.
		abandon(c.PgConn())
	}
	if h == nil {
		s.setDeadline(nc, time.Time{})
	}
	if err == nil {
		return nil
	}
	var netErr net.Error
	timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
	return s.outcome(parent, err, timedOut)
}

// held is what a holder's round trips keep on the connection it holds
// (see onConn): the deadline set (zero: none), and the watch of a
// caller's context: its Done channel and the watch's stop (nil: none);
// moving is done once the watch, if it ran, has moved the deadline.
type held struct {
	deadline time.Time
	done     <-chan struct{}
	stop     func() bool
	moving   sync.WaitGroup
}

// endWatch ends the held watch between two round trips. If it ran, its
// caller went away after the last one had read every answer: the
// connection is sound, but its deadline, moved to the past, must be set
// anew.
func (h *held) endWatch() {
	if h.stop() {
		h.moving.Done()
	} else {
		h.moving.Wait()
		h.deadline = time.Time{}
	}
	h.done, h.stop = nil, nil
}

// heldDeadlineMin is, in eighths of the store's timeout, the least of it
// a round trip under a held deadline (see onConn) has.
const heldDeadlineMin = 7

// releaseHeld ends what round trips on conn kept in h, before conn goes
// back to the pool: the watch (if the caller went away, the deadline is
// being moved: the connection is closed) and the deadline, which the
// pool's own statements on it (a ping, a ROLLBACK) must not meet.
func (s *Store) releaseHeld(conn *pgxpool.Conn, h *held) {
	if h.stop != nil {
		if h.stop() {
			h.moving.Done()
		} else {
			abandon(conn.Conn().PgConn())
		}
		h.done, h.stop = nil, nil
	}
	if h.deadline.IsZero() {
		return
	}
	h.deadline = time.Time{}
	s.setDeadline(conn.Conn().PgConn().Conn(), time.Time{})
}

// setDeadline sets nc's deadline unless the store is closed (Close's
// interrupt, which set a deadline in the past, must not be undone).
func (s *Store) setDeadline(nc net.Conn, t time.Time) bool {
	s.connsMu.RLock()
	defer s.connsMu.RUnlock()
	if s.closed.Load() {
		return false
	}
	nc.SetDeadline(t)
	return true
}

// armDeadline is setDeadline for a round trip not held (see onConn),
// which also returns, under the same lock, the function that moves the
// connection's deadline to the past, made once per connection (nil for a
// connection not of the pool), not a closure per round trip.
func (s *Store) armDeadline(c *pgx.Conn, nc net.Conn, t time.Time) (interrupt func(), ok bool) {
	s.connsMu.RLock()
	defer s.connsMu.RUnlock()
	if s.closed.Load() {
		return nil, false
	}
	nc.SetDeadline(t)
	if st := s.conns[c]; st != nil {
		interrupt = st.interrupt
	}
	return interrupt, true
}

// callerGone is the error of a call whose caller's context ended: it wraps
// the context's error (context.Canceled, context.DeadlineExceeded), not
// storage.ErrUnavailable, since the server may be fine.
type callerGone struct {
	err    error // the caller's context's error
	during error // what the abandoned round trip returned, if it ran
}

func (e *callerGone) Error() string {
	if e.during != nil {
		return fmt.Sprintf("postgres: %v (%v)", e.err, e.during)
	}
	return "postgres: " + e.err.Error()
}

func (e *callerGone) Unwrap() error { return e.err }

// Pool is the store's connection pool, for tests and tools.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// wrap turns errors met on a closed store into storage.ErrClosed.
func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return storage.ErrClosed
	}
	var gone *callerGone
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrClosed) || errors.Is(err, storage.ErrUnavailable) ||
		errors.As(err, &gone) {
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("postgres: %w: %w", storage.ErrUnavailable, err)
	}
	if exists(err) {
		return fmt.Errorf("postgres: %w: %w", storage.ErrExists, err)
	}
	return fmt.Errorf("postgres: %w", err)
}

// exists reports whether err is a key written as new (Insert) that the
// table held: its plain INSERT's unique violation, which failed the
// transaction (every other write of a key is an upsert, which does not
// fail so).
func exists(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "orrery_kv"
}

// unreachable reports whether err means the server could not be reached or
// its session was lost (refused, reset, shut down, out of connections),
// not that a statement was wrong: the request is answered 503 and the pool
// connects again at the next one, so the gateway recovers on its own once
// the server is back.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "25006" {
			// read_only_sql_transaction: a server in recovery (a standby
			// the URL reached, or a primary being demoted); the writable
			// one is found at the next connection (target_session_attrs).
			return true
		}
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources (too many connections, disk full)
			"57", // operator intervention (shutdown, cannot connect now)
			"58": // system error (I/O)
			return true
		}
		return false
	}
	// A connection attempt that failed, refused or timed out (the URL's
	// connect_timeout, or Options.Timeout).
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) && !errors.Is(err, context.Canceled) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// Anything else from the driver without a server error code is the
	// connection's: a dial refused, a reset, a closed connection.
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || isConnClosed(err)
}

// isConnClosed matches the driver's errors for a connection it had already
// closed after a failure, which carry no type of their own.
func isConnClosed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "conn busy") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "failed to connect") ||
		strings.Contains(msg, "timeout: context")
}

// querier is what reads need: the pool, a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func getFrom(ctx context.Context, q querier, key []byte) ([]byte, error) {
	var v []byte
	err := q.QueryRow(ctx, `SELECT v FROM orrery_kv WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// Get returns the value stored under key, or storage.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	var v []byte
	err := s.timed(ctx, func(ctx context.Context) (err error) {
		v, err = getFrom(ctx, s.pool, key)
		return err
	})
	return v, s.wrap(err)
}

// NewIterator iterates over a point-in-time view of [lower, upper) (see
// newStoreIterator).
func (s *Store) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	it, err := s.newStoreIterator(ctx, lower, upper, reverse)
	if err != nil {
		return nil, s.wrap(err)
	}
	return it, nil
}

// NewBatch starts a batch whose writes wait in memory until Commit.
func (s *Store) NewBatch() storage.Batch {
	return &batch{store: s, overlay: overlay{pending: newTree()}}
}

// NewSnapshot opens a repeatable-read, read-only transaction on a
// connection of its own (one round trip: the snapshot is taken then, not
// at its first read).
func (s *Store) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	snap, err := s.acquireSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	snap.mu.Lock()
	err = snap.send(ctx, func(t *trip) { t.queue(selectOneStatement, nil, nil) })
	snap.mu.Unlock()
	if err != nil {
		snap.Close()
		return nil, s.wrap(err)
	}
	return snap, nil
}

// acquireSnapshot takes a slot for a snapshot not yet begun; its
// connection comes from the pool with its first round trip (see onConn).
// A connection that lingers (see lingerFor) is taken first, with its slot.
func (s *Store) acquireSnapshot(ctx context.Context) (*snapshot, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &callerGone{err: err}
	}
	conn, err := s.takeSlot(ctx, false)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return &snapshot{store: s, conn: conn, slot: true, begun: true, stale: true}, nil
	}
	return &snapshot{store: s, slot: true}, nil
}

// SnapshotAll opens a snapshot whose transaction begins with the reads of
// the watermark and of keys, all in one round trip: the watermark is the
// snapshot's own (the oldest transaction running when it was taken), so
// every transaction below it is in the snapshot. The snapshot tells the
// highest transaction id that had ended then too (storage.Ended).
func (s *Store) SnapshotAll(ctx context.Context, keys [][]byte) (storage.Snapshot, [][]byte, uint64, error) {
	snap, err := s.acquireSnapshot(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	values := make([][]byte, len(keys))
	var w, ended int64
	snap.mu.Lock()
	err = snap.send(ctx, func(t *trip) {
		t.queue(snapshotMarksStatement, int8Columns2, rowReader(func(cols [][]byte) error {
			var ok1, ok2 bool
			w, ok1 = rawInt8(cols[0])
			ended, ok2 = rawInt8(cols[1])
			if !ok1 || !ok2 {
				return errBadRow
			}
			return nil
		}))
		if len(keys) > 0 {
			tripGetMany(t, keys, values)
		}
	})
	snap.mu.Unlock()
	if err != nil {
		snap.Close()
		return nil, nil, 0, s.wrap(err)
	}
	snap.ended = uint64(ended)
	return snap, values, uint64(w), nil
}

// snapshotMarksSQL reads, as of the snapshot of the transaction it runs
// first in, the watermark (the oldest transaction id still running) and
// the highest transaction id that had ended (one below the snapshot's
// xmax), both under the timeline.
const snapshotMarksSQL = `SELECT t | pg_snapshot_xmin(s)::text::bigint, t | (pg_snapshot_xmax(s)::text::bigint - 1)
	FROM (SELECT ` + timelineSQL + ` AS t, pg_current_snapshot() AS s) AS now`

// newSnapshot opens a repeatable-read, read-only transaction on a
// connection of its own, in one round trip with its first statement: the
// page query sql, whose rows it returns, or a no-op when sql is empty.
func (s *Store) newSnapshot(parent context.Context, sql string, args []any) (*snapshot, []entry, error) {
	var conn *pgxpool.Conn
	var page []entry
	err := s.timed(parent, func(ctx context.Context) error {
		var err error
		conn, err = s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		var b pgx.Batch
		b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
		if sql == "" {
			b.Queue(`SELECT 1`) // the snapshot is taken at the first statement
		} else {
			b.Queue(sql, args...).Query(func(rows pgx.Rows) (err error) {
				page, err = scanPage(rows)
				return err
			})
		}
		if err := conn.SendBatch(ctx, &b).Close(); err != nil {
			conn.Release() // the pool drops a connection left in a transaction
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &snapshot{store: s, conn: conn, begun: true}, page, nil
}

// rollback ends conn's transaction, closing the connection if the server
// does not answer in time, and returns it to the pool.
func (s *Store) rollback(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		conn.Conn().Close(context.Background())
	}
	conn.Release()
}

// rollbackHeld ends the explicit transaction of a holder of conn (a
// snapshot), under the deadline its round trips keep in h (set anew if
// too little of it is left), and returns conn to the pool: the ROLLBACK
// is a prepared statement bound by reference, not a query of the
// driver's under a context of its own. A connection whose transaction is
// not ended after it (the server did not answer, the caller went away)
// is closed.
func (s *Store) rollbackHeld(conn *pgxpool.Conn, h *held) {
	c := conn.Conn()
	err := s.onConn(context.Background(), &conn, h, func(ctx context.Context, c *pgx.Conn) error {
		t := trip{ctx: ctx, conn: c}
		t.queue(rollbackStatement, nil, nil)
		return t.send()
	})
	s.releaseHeld(conn, h)
	if err != nil || c.PgConn().TxStatus() != 'I' {
		abandon(c.PgConn())
	}
	conn.Release()
}

// rollbackImplicit is rollback for a connection in an implicit transaction
// (see sharedBatch): a BEGIN first, which makes it explicit (a ROLLBACK
// alone would roll it back too, with a warning that there is no
// transaction), then the ROLLBACK, and a Sync.
func (s *Store) rollbackImplicit(conn *pgxpool.Conn) {
	c := conn.Conn()
	nc := c.PgConn().Conn()
	err := errors.New("postgres: closed")
	if s.setDeadline(nc, time.Now().Add(s.timeout)) {
		t := trip{ctx: context.Background(), conn: c}
		t.queue(beginStatement, nil, nil)
		t.queue(rollbackStatement, nil, nil)
		err = t.send()
		s.setDeadline(nc, time.Time{})
	}
	if err != nil || c.PgConn().TxStatus() != 'I' {
		abandon(c.PgConn())
	}
	conn.Release()
}

// Close closes the pool and gives up every duty held. Later operations
// return storage.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return storage.ErrClosed
	}
	s.leadsMu.Lock()
	leads := make([]*lead, 0, len(s.leads))
	for l := range s.leads {
		leads = append(leads, l)
	}
	s.leadsMu.Unlock()
	for _, l := range leads {
		l.release()
		l.markLost()
	}
	s.endAllLingering()
	s.cancel()
	s.interrupt()
	s.pool.Close()
	return nil
}

// interrupt fails at once every read and write under way or to come on
// the pool's connections, so that the round trips in flight (a write
// waiting for a lock, a silent server) end now and give their
// connections back, which pool.Close waits for. It is what a context
// watched by every round trip would do, without that watch's cost on
// each one (a registration with a context shared by every request).
// AfterConnect refuses a connection once the store is closed, so none
// escapes.
func (s *Store) interrupt() {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	past := time.Unix(1, 0)
	for c := range s.conns {
		c.PgConn().Conn().SetDeadline(past)
	}
}

// entry is a key and value; in a batch's overlay, deleted marks a pending
// deletion.
type entry struct {
	key, value []byte
	deleted    bool
	// fresh marks a key written as new (storage.Inserter).
	fresh bool
}

func lessEntry(a, b entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// entryNodes is the nodes of finished batches' trees, for the next ones.
var entryNodes = btree.NewFreeListG[entry](btree.DefaultFreeListSize)

// trees is the emptied trees of finished batches, for the next ones.
var trees sync.Pool // *btree.BTreeG[entry]

func newTree() *btree.BTreeG[entry] {
	if t, ok := trees.Get().(*btree.BTreeG[entry]); ok {
		return t
	}
	return btree.NewWithFreeListG(32, lessEntry, entryNodes)
}

// hashKey maps a lock name to a one-part advisory-lock key. Two names that
// collide share a lock, which only serializes more than needed.
func hashKey(key []byte) int64 {
	h := fnv.New64a()
	h.Write(key)
	return int64(h.Sum64())
}

// hashKey32 maps a duty's name to the second half of a two-part key.
func hashKey32(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}
