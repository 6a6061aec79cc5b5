package instance

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// The counted budget: what one request of each kind costs the whole server
// in counts that do not move with the machine's load, kept per store and
// kind in bench/budget.txt. A request goes as the Go SDK writes it over one
// kept-alive HTTPS connection to a server wired as orrery serve wires it
// (the dual listener, TLS, net/http, the observer's metrics and access
// log, the engine, the store), as in BenchmarkTLSRequest. The counts:
//
//   - allocs/op: heap allocations per request in the whole process (the
//     client allocates nothing), counted as testing.AllocsPerRun counts
//     them, on one P (with two, a goroutine's descriptor or a sync.Pool's
//     ring is made or reused depending on where a goroutine ran), and with
//     the garbage collector off (a collection empties the pools): the
//     median of allocBatches batches of allocBatch requests, so that what
//     runs beside the requests now and then (a value formatted once a
//     second, Pebble's own goroutines) does not count; within
//     allocTolerance (pebbleAllocTolerance on Pebble);
//   - sets/op, deletes/op, bytes/op: the keys a request's committed
//     batches set and delete, and the bytes of the keys and values set;
//   - gets/op, iterators/op, steps/op: the store's point reads, iterators
//     opened and keys an iterator stepped onto, through the store, its
//     snapshots and its batches;
//   - syncs/op (Pebble): syncs of the write-ahead log per request, one
//     client at a time (no group commit to share them);
//   - trips/op, statements/op (PostgreSQL): the round trips between the
//     gateway and PostgreSQL per request, and the statements sent in them,
//     counted by a proxy between the two (pgtest's Proxy, its Log; see
//     postgresTrips). On PostgreSQL the store is not tallied (the engine runs
//     its shared path through storage.Shared, which a wrapper would hide):
//     sets/op to steps/op are the memory and Pebble stores'.
//
// The postgres rows are measured where PostgreSQL is installed; elsewhere
// their test skips (fails under ORRERY_REQUIRE_POSTGRES=1, as other
// PostgreSQL tests).
//
// Every count but allocs/op (and trips/op, see postgresTripTolerance) is
// exact, and any growth fails. A count well
// below its budget is logged, so that the file is tightened:
//
//	ORRERY_WRITE_BUDGET=1 go test ./instance -run CountedBudget
//
// rewrites bench/budget.txt with the counts measured now (allocations
// to a tenth), for a commit that says why they moved.
const budgetFile = "../bench/budget.txt"

// budgetName is the file's name from the repository's root, in messages.
const budgetName = "bench/budget.txt"

// allocTolerance is how far above its budget a request's allocations may
// be measured before the test fails. Over 107 runs of every kind on both
// stores, 87 of them beside two CPU hogs (load average 12 to 16 on two
// cores), the median of the batches stayed within -0.09 and +0.10 of the
// budget (single batches within -0.7 and +1.2); a request that makes one
// allocation more measures 1.0 above.
const allocTolerance = 0.5

// pebbleAllocTolerance is allocTolerance on Pebble, whose background work
// (the WAL's flush and sync loop, memtable rotation) allocates in the same
// process and moves with the disk: in a CI run beside five processes
// running tests and benchmarks (load average 17 to 20 on two cores, their
// fsyncs on the same disk), Pebble's medians rose by 0.8 to 1.3 (create
// 51.3 on a budget of 50) while the memory store's stayed within 0.05. The
// request path both stores share is held to allocTolerance on the memory
// store; on Pebble a growth of two allocations per request is caught.
const pebbleAllocTolerance = 1.5

// postgresAllocTolerance is allocTolerance on PostgreSQL: the gateway's
// connection pool and its pgx connections read and time out on goroutines
// of their own, and a snapshot's lingering connection is ended by a timer
// when the next query comes late (see postgresTrips). Over 25 runs of
// every kind, 12 of them beside two CPU hogs (load average 7), and 12 more
// of the query beside them, the medians stayed within +0.08 of the budget
// but a patch's once +0.68 and the query's up to +0.92 (beside the hogs);
// as on Pebble, a growth of two allocations per request is caught.
const postgresAllocTolerance = 1.5

// postgresTripTolerance is how far above its budget a request's round
// trips to PostgreSQL may be. Writes and point reads measured exact in
// every run; a query's snapshot lingers for the next one by the clock
// (see postgresTrips): before postgresTrips set apart the ROLLBACK's
// lazy preparation, 4 runs of 37 beside two CPU hogs measured 3.05; since,
// 14 of 14 measured 3. The tolerance keeps a timing of the linger not yet
// seen from failing CI; a request that makes one round trip more
// measures 1.0 above. statements/op stays exact (a late linger end can
// only take a ROLLBACK out of the window: 5.95 once, logged).
const postgresTripTolerance = 0.5

// syncTolerance is how far above its budget a write's WAL syncs may be:
// Pebble syncs now and then on its own, 1 to 3 times in a count of 450
// writes (at most 1.0067 syncs per write in those runs); a write that
// syncs twice measures 2.
const syncTolerance = 0.02

const (
	allocWarmup  = 30 // requests before counting allocations
	allocBatches = 9  // batches counted; their median is kept
	allocBatch   = 50 // requests per batch
	countWarmup  = 3  // requests before counting keys and reads
	countRuns    = 20 // requests counted
)

// budgetStores and budgetCounts are the file's order.
var (
	budgetStores = []string{"memory", "pebble", "postgres"}
	budgetCounts = []string{"allocs/op", "sets/op", "deletes/op", "bytes/op", "gets/op", "iterators/op", "steps/op", "syncs/op", "trips/op", "statements/op"}
)

// A budgetKind is one request kind: requests(r, n) makes n requests of it,
// each different where the kind writes a new value; want is their status.
type budgetKind struct {
	name     string
	want     int
	ifMatch  bool // the request carries the item's current ETag (If-Match)
	requests func(r *budgetRig, n int) [][]byte
}

// budgetDoc is an item shaped as the server benchmark's (about 300 bytes),
// in partition "p", the one sdkRequest names.
func budgetDoc(id string, n int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"pk":"p","n":%d,"tags":["a","b","c"],"nested":{"x":%d,"y":"yy"},"payload":"%s"}`,
		id, n, n%7, strings.Repeat("x", 200))
}

// budgetQueryBase is where the queried items' n start, far from the n of
// the items the other kinds write.
const budgetQueryBase = 1000000

var (
	budgetCreate = budgetKind{name: "create", want: 201, requests: func(r *budgetRig, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			id := "c" + strconv.Itoa(r.created)
			r.created++
			out[i] = r.sdk("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{"X-Ms-Documentdb-Is-Upsert", "true"}, budgetDoc(id, r.next()))
		}
		return out
	}}
	budgetUpsert = budgetKind{name: "upsert", want: 200, requests: func(r *budgetRig, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = r.sdk("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{"X-Ms-Documentdb-Is-Upsert", "true"}, budgetDoc("u", r.next()))
		}
		return out
	}}
	budgetRead = budgetKind{name: "read", want: 200, requests: func(r *budgetRig, n int) [][]byte {
		req := r.sdk("GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, nil)
		return repeat(req, n)
	}}
	budgetReplace = budgetKind{name: "replace", want: 200, ifMatch: true, requests: func(r *budgetRig, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = r.sdk("PUT", "docs", "dbs/db/colls/c/docs/x", "/dbs/db/colls/c/docs/x", []string{"If-Match", string(r.etag)}, budgetDoc("x", r.next()))
		}
		return out
	}}
	budgetPatch = budgetKind{name: "patch", want: 200, requests: func(r *budgetRig, n int) [][]byte {
		req := r.sdk("PATCH", "docs", "dbs/db/colls/c/docs/hot", "/dbs/db/colls/c/docs/hot", nil,
			[]byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`))
		return repeat(req, n)
	}}
	budgetQuery = budgetKind{name: "query", want: 200, requests: func(r *budgetRig, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			body := fmt.Appendf(nil, `{"query":"SELECT * FROM c WHERE c.n = @n","parameters":[{"name":"@n","value":%d}]}`, budgetQueryBase+i%10)
			req := r.sdk("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{
				"X-Ms-Documentdb-Populatequerymetrics", "true", "X-Ms-Documentdb-Query-Enablecrosspartition", "true", "X-Ms-Documentdb-Query", "True"}, body)
			// The SDK sends a query as application/query+json and asks for
			// no minimal answer.
			out[i] = bytes.Replace(req, []byte("Content-Type: application/json\r\nPrefer: return=minimal\r\n"), []byte("Content-Type: application/query+json\r\n"), 1)
		}
		return out
	}}
)

// budgetKinds are the kinds in the file's order: each kind's test below
// measures it on the embedded stores, and
// TestTheGatewayOnPostgreSQLStaysWithinItsCountedBudget measures every
// one of them on PostgreSQL.
var budgetKinds = []budgetKind{budgetCreate, budgetUpsert, budgetRead, budgetReplace, budgetPatch, budgetQuery}

func repeat(req []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = req
	}
	return out
}

// TestACreateStaysWithinItsCountedBudget: an upsert of a new item (the
// item, its feed entry, its index entries, its creation-order and RID
// entries) costs no more than bench/budget.txt says.
func TestACreateStaysWithinItsCountedBudget(t *testing.T) { checkBudget(t, budgetCreate) }

// TestAnUpsertStaysWithinItsCountedBudget: an upsert over an existing item
// that changes a value (and its _ts: every write here lands in a later
// second) costs no more than bench/budget.txt says.
func TestAnUpsertStaysWithinItsCountedBudget(t *testing.T) { checkBudget(t, budgetUpsert) }

// TestAPointReadStaysWithinItsCountedBudget: a point read costs no more
// than bench/budget.txt says.
func TestAPointReadStaysWithinItsCountedBudget(t *testing.T) { checkBudget(t, budgetRead) }

// TestAReplaceStaysWithinItsCountedBudget: a replace under If-Match with
// the item's current ETag costs no more than bench/budget.txt says.
func TestAReplaceStaysWithinItsCountedBudget(t *testing.T) { checkBudget(t, budgetReplace) }

// TestAPatchStaysWithinItsCountedBudget: a patch incr of one item costs no
// more than bench/budget.txt says.
func TestAPatchStaysWithinItsCountedBudget(t *testing.T) { checkBudget(t, budgetPatch) }

// TestAQueryInOnePartitionStaysWithinItsCountedBudget: a query of one
// partition served by an index (one item of ten matches) costs no more
// than bench/budget.txt says.
func TestAQueryInOnePartitionStaysWithinItsCountedBudget(t *testing.T) {
	checkBudget(t, budgetQuery)
}

// TestTheGatewayOnPostgreSQLStaysWithinItsCountedBudget: each kind above
// costs a gateway on PostgreSQL no more than bench/budget.txt says. It runs
// after the memory and Pebble rows of every kind: a PostgreSQL rig's pool
// and proxy wind down on goroutines of their own after it closes, and on a
// loaded machine their allocations fell into the next store's count (the
// Pebble patch measured 33.7-33.9 against 32 in 2 of 6 runs of the package
// two at a time beside two CPU hogs, with the rows in one test per kind).
func TestTheGatewayOnPostgreSQLStaysWithinItsCountedBudget(t *testing.T) {
	if err := pgtest.Available(); err != nil {
		pgtest.Skip(t, err)
	}
	for _, k := range budgetKinds {
		t.Run(k.name, func(t *testing.T) { checkBudgetOn(t, k, "postgres") })
	}
}

// checkBudget checks kind k's rows of the embedded stores (memory and
// Pebble).
func checkBudget(t *testing.T, k budgetKind) { checkBudgetOn(t, k, "memory", "pebble") }

// checkBudgetOn measures kind k on stores and checks the counts against
// their budget.
func checkBudgetOn(t *testing.T, k budgetKind, stores ...string) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: the budget's allocations are those of a plain build")
	}
	budget, toolchain, err := readBudget(budgetFile)
	if err != nil {
		t.Fatal(err)
	}
	// Allocations are the toolchain's as much as the server's: under
	// another Go release or architecture than the budget's, they are
	// reported, not held (the store's counts are held whatever the
	// toolchain).
	sameToolchain := toolchain == thisToolchain()
	if !sameToolchain {
		t.Logf("%s counted allocations with %q; this is %s: allocations are logged, not held (refresh the file for this toolchain)", budgetName, toolchain, thisToolchain())
	}
	got := map[string]float64{}
	for _, store := range stores {
		for name, v := range measureKind(t, store, k) {
			got[store+" "+k.name+" "+name] = v
		}
	}
	writing := os.Getenv("ORRERY_WRITE_BUDGET") != ""
	report := t.Errorf
	if writing {
		report = t.Logf
	}
	var lines []string
	for _, key := range sortedBudgetKeys(got) {
		v := got[key]
		b, ok := budget[key]
		lines = append(lines, fmt.Sprintf("%s %s", key, formatCount(key, v)))
		tol, tolerance := 1e-9, "exact"
		switch {
		case strings.HasSuffix(key, " allocs/op"):
			tol = allocTolerance
			switch {
			case strings.HasPrefix(key, "pebble "):
				tol = pebbleAllocTolerance
			case strings.HasPrefix(key, "postgres "):
				tol = postgresAllocTolerance
			}
			tolerance = fmt.Sprintf("tolerance %g", tol)
		case strings.HasSuffix(key, " syncs/op"):
			tol, tolerance = syncTolerance, fmt.Sprintf("tolerance %g", syncTolerance)
		case strings.HasSuffix(key, " trips/op"):
			tol, tolerance = postgresTripTolerance, fmt.Sprintf("tolerance %g", postgresTripTolerance)
		}
		switch {
		case !ok:
			report("%s: measured %s, and %s has no budget for it: add it (ORRERY_WRITE_BUDGET=1 go test ./instance -run CountedBudget writes the counts measured)",
				key, formatCount(key, v), budgetName)
		case v > b+tol && !sameToolchain && strings.HasSuffix(key, " allocs/op"):
			t.Logf("%s is %s, its budget %s counted with %s", key, formatCount(key, v), formatCount(key, b), toolchain)
		case v > b+tol:
			report("OVER BUDGET: %s is %s, its budget %s (%s): the request path grew. If that is meant, say why in the commit and refresh %s with ORRERY_WRITE_BUDGET=1 go test ./instance -run CountedBudget",
				key, formatCount(key, v), formatCount(key, b), tolerance, budgetName)
		case v < b-tol:
			t.Logf("below budget: %s is %s, its budget %s: tighten %s (ORRERY_WRITE_BUDGET=1 go test ./instance -run CountedBudget)",
				key, formatCount(key, v), formatCount(key, b), budgetName)
		}
	}
	t.Logf("measured, in %s's format:\n%s", budgetName, strings.Join(lines, "\n"))
	if writing {
		for key, v := range got {
			switch {
			case strings.HasSuffix(key, " allocs/op"):
				v = math.Round(v*10) / 10
			case strings.HasSuffix(key, " syncs/op"):
				v = math.Round(v*100) / 100
			}
			budget[key] = v
		}
		if err := writeBudget(budgetFile, budget); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s's lines for %s", budgetName, k.name)
	}
}

// measureKind measures k's counts on a store: allocations and syncs on an
// instance over the store itself, the rest on another that counts them as
// countingOf(store) says (whose wrappers or proxy allocate).
func measureKind(t *testing.T, store string, k budgetKind) map[string]float64 {
	out := map[string]float64{}

	r := startBudgetRig(t, store, false)
	reqs := k.requests(r, allocWarmup+allocBatches*allocBatch)
	r.send(t, k, reqs[:allocWarmup])
	syncs0 := r.walSyncs(t)
	// One P, as testing.AllocsPerRun counts: with two, a goroutine's
	// descriptor and a sync.Pool's ring are allocated or reused depending on
	// which P a goroutine ran on. No collection: it empties the pools.
	per := make([]float64, allocBatches)
	func() {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		var m0, m1 runtime.MemStats
		for b := range allocBatches {
			batch := reqs[allocWarmup+b*allocBatch : allocWarmup+(b+1)*allocBatch]
			runtime.ReadMemStats(&m0)
			r.send(t, k, batch)
			runtime.ReadMemStats(&m1)
			per[b] = float64(m1.Mallocs-m0.Mallocs) / float64(len(batch))
		}
	}()
	slices.Sort(per)
	out["allocs/op"] = per[allocBatches/2]
	t.Logf("%s %s: allocs/op of %d batches of %d requests: median %.2f, least %.2f, most %.2f", store, k.name, allocBatches, allocBatch, out["allocs/op"], per[0], per[allocBatches-1])
	if store == "pebble" {
		out["syncs/op"] = float64(r.walSyncs(t)-syncs0) / float64(allocBatches*allocBatch)
	}

	r = startBudgetRig(t, store, true)
	reqs = k.requests(r, countWarmup+countRuns)
	r.send(t, k, reqs[:countWarmup])
	if countingOf(store) == byProxy {
		r.proxy.StartLog()
		r.send(t, k, reqs[countWarmup:])
		log := r.proxy.Log()
		statements, opening, lingerEnds := postgresTrips(log)
		out["trips/op"] = float64(int64(len(log))-opening-lingerEnds) / countRuns
		out["statements/op"] = float64(statements) / countRuns
		return out
	}
	before := r.tally.snapshot()
	r.send(t, k, reqs[countWarmup:])
	after := r.tally.snapshot()
	for i, name := range tallyNames {
		out[name] = float64(after[i]-before[i]) / countRuns
	}
	return out
}

// postgresTrips reads a proxy's log of the counted requests: the
// statements the requests executed (prepare-only round trips not counted),
// and the round trips that are not the requests' own. A snapshot's
// connection lingers in its transaction for the next snapshot, which sends
// the ROLLBACK ahead of its BEGIN (storage/postgres's lingerFor); on a
// loaded machine the next query can come after the linger ended, and the
// store sent the ROLLBACK in a trip of its own (lingerEnds; the ROLLBACK
// is counted among the statements either way), and the next snapshot
// takes another connection of the pool, which prepares each statement in
// a trip of its own before its first use there, the ROLLBACK too when its
// linger first ends (opening: prepare-only trips that each prepare
// statements not yet prepared on their connection in the log; a request
// that prepares a statement again on a connection is counted).
func postgresTrips(log []pgtest.Trip) (statements, opening, lingerEnds int64) {
	type connStatement struct {
		conn int
		sql  string
	}
	prepared := map[connStatement]bool{}
	for _, trip := range log {
		prepares, fresh := 0, true
		for _, st := range trip.Statements {
			if sql, ok := strings.CutPrefix(st, "prepare: "); ok {
				prepares++
				cs := connStatement{trip.Conn, sql}
				fresh = fresh && !prepared[cs]
				prepared[cs] = true
			}
		}
		statements += int64(len(trip.Statements) - prepares)
		switch {
		case prepares > 0 && prepares == len(trip.Statements) && fresh:
			opening++
		case len(trip.Statements) == 1 && trip.Statements[0] == "ROLLBACK":
			lingerEnds++
		}
	}
	return statements, opening, lingerEnds
}

// budgetRig is an instance, one HTTPS connection to it, and the engine's
// clock, which moves a second before each request.
type budgetRig struct {
	inst    *Instance
	c       *rawClient
	host    string
	reg     *prometheus.Registry
	tally   *tally        // the store's, when counted byTally
	proxy   *pgtest.Proxy // between the gateway and PostgreSQL, when counted byProxy
	seconds atomic.Int64
	etag    []byte // the replaced item's current ETag
	n       int    // the next value written to n
	created int    // items created so far
}

func (r *budgetRig) next() int { r.n++; return r.n }

func (r *budgetRig) sdk(method, rtype, link, path string, extra []string, body []byte) []byte {
	return sdkRequest(r.host, method, rtype, link, path, extra, body)
}

// How a rig counts what requests cost a store, beside allocations.
type counting int

const (
	// byTally: the store is wrapped in a tallyStore, which counts the
	// keys and bytes its batches set and delete and its point reads,
	// iterators and steps.
	byTally counting = iota
	// byProxy: the gateway reaches PostgreSQL through pgtest's Proxy,
	// which counts round trips and the statements in them (the store is
	// not tallied: see trips/op above).
	byProxy
)

// countingOf is how store's rows are counted.
func countingOf(store string) counting {
	if store == "postgres" {
		return byProxy
	}
	return byTally
}

// startBudgetRig starts a rig on store: counted, it counts what requests
// cost the store as countingOf(store) says, whose wrappers or proxy
// allocate; else nothing stands between the server and its store, and
// only allocations and syncs are counted.
func startBudgetRig(t *testing.T, store string, counted bool) *budgetRig {
	t.Helper()
	r := &budgetRig{reg: prometheus.NewRegistry()}
	var s storage.Store
	switch store {
	case "memory":
		s = memory.New()
	case "pebble":
		ps, err := pebble.Open(t.TempDir(), pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s = ps
	case "postgres":
		url := pgtest.URL(t)
		if counted && countingOf(store) == byProxy {
			r.proxy = pgtest.NewProxy(t, pgtest.Target(t, url))
			url = r.proxy.URL(t, url)
		}
		ps, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s = ps
	}
	if counted && countingOf(store) == byTally {
		r.tally = &tally{}
		s = &tallyStore{Store: s, t: r.tally}
	}
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Truncate(time.Second)
	inst, err := Start(t.Context(), Config{Store: s, Certificate: &cert, Metrics: r.reg,
		Engine:    engine.Options{Now: func() time.Time { return base.Add(time.Duration(r.seconds.Load()) * time.Second) }, SweepInterval: -1},
		AccessLog: slog.New(server.NewTextLogHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	r.inst = inst
	ctx := context.Background()
	if _, err := inst.Engine.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Engine.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil); err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", inst.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r.c = &rawClient{c: conn, buf: make([]byte, 64<<10)}
	r.host = inst.Addr().String()
	// The items the kinds read and write, and the ten a query looks among.
	seed := func(id string, n int) {
		req := r.sdk("POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{"X-Ms-Documentdb-Is-Upsert", "true"}, budgetDoc(id, n))
		if st := r.c.do(t, req); st != 201 {
			t.Fatalf("seeding %s: status %d", id, st)
		}
	}
	// Values written start at 1000: strconv formats those below 100
	// without allocating.
	r.n = 1000
	for _, id := range []string{"u", "r", "hot", "x"} {
		seed(id, r.n)
	}
	r.etag = append([]byte(nil), r.responseETag(t)...) // x's
	for i := range 10 {
		seed("q"+strconv.Itoa(i), budgetQueryBase+i)
	}
	if r.tally != nil {
		// The container's presence filter is filled in the background
		// after its first write, with a scan of its items; until it is
		// ready a create reads its key. Wait for it, so that neither lands
		// in a count.
		for i := 0; ; i++ {
			gets := r.tally.gets.Load()
			seed("probe"+strconv.Itoa(i), -1)
			if r.tally.gets.Load() == gets {
				break
			}
			if i == 10000 {
				t.Fatal("the presence filter is not ready after 10,000 creates")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return r
}

// send sends reqs in turn, each a second later on the engine's clock, and
// checks their status. Nothing here allocates.
func (r *budgetRig) send(t *testing.T, k budgetKind, reqs [][]byte) {
	for _, req := range reqs {
		r.seconds.Add(1)
		if k.ifMatch {
			i := bytes.Index(req, []byte("\r\nIf-Match: "))
			copy(req[i+len("\r\nIf-Match: "):], r.etag)
		}
		if st := r.c.do(t, req); st != k.want {
			t.Fatalf("%s: status %d, want %d: %s", k.name, st, k.want, r.c.buf[:min(len(r.c.buf), 400)])
		}
		if k.ifMatch {
			e := r.responseETag(t)
			if len(e) != len(r.etag) {
				t.Fatalf("an ETag of %d bytes after one of %d", len(e), len(r.etag))
			}
			copy(r.etag, e)
		}
	}
}

// responseETag is the ETag of the last response.
func (r *budgetRig) responseETag(t *testing.T) []byte {
	head := r.c.buf[:bytes.Index(r.c.buf, []byte("\r\n\r\n"))]
	i := bytes.Index(head, []byte("\r\nEtag: "))
	if i < 0 {
		t.Fatalf("no ETag in %s", head)
	}
	v := head[i+len("\r\nEtag: "):]
	if j := bytes.IndexByte(v, '\r'); j >= 0 {
		v = v[:j]
	}
	return v
}

// walSyncs is the store's write-ahead log syncs so far (Pebble's metric).
func (r *budgetRig) walSyncs(t *testing.T) uint64 {
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "orrery_storage_wal_syncs_total" {
			return uint64(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	return 0
}

// A tally counts what a store is asked to do.
type tally struct {
	sets, deletes, bytes, gets, iterators, steps atomic.Int64
}

var tallyNames = []string{"sets/op", "deletes/op", "bytes/op", "gets/op", "iterators/op", "steps/op"}

func (t *tally) snapshot() []int64 {
	return []int64{t.sets.Load(), t.deletes.Load(), t.bytes.Load(), t.gets.Load(), t.iterators.Load(), t.steps.Load()}
}

// tallyReader counts a reader's point reads, iterators and steps.
type tallyReader struct {
	storage.Reader
	t *tally
}

func (r tallyReader) Get(ctx context.Context, key []byte) ([]byte, error) {
	r.t.gets.Add(1)
	return r.Reader.Get(ctx, key)
}

func (r tallyReader) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	r.t.iterators.Add(1)
	it, err := r.Reader.NewIterator(ctx, lower, upper, reverse)
	if err != nil {
		return nil, err
	}
	return &tallyIterator{Iterator: it, t: r.t}, nil
}

type tallyIterator struct {
	storage.Iterator
	t *tally
}

func (i *tallyIterator) Next() bool {
	ok := i.Iterator.Next()
	if ok {
		i.t.steps.Add(1)
	}
	return ok
}

// tallyStore counts a store's reads, and the keys and bytes its batches
// write when they commit.
type tallyStore struct {
	storage.Store
	t *tally
}

func (s *tallyStore) Get(ctx context.Context, key []byte) ([]byte, error) {
	return tallyReader{s.Store, s.t}.Get(ctx, key)
}

func (s *tallyStore) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return tallyReader{s.Store, s.t}.NewIterator(ctx, lower, upper, reverse)
}

func (s *tallyStore) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	snap, err := s.Store.NewSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	return tallySnapshot{Snapshot: snap, r: tallyReader{snap, s.t}}, nil
}

func (s *tallyStore) NewBatch() storage.Batch {
	return &tallyBatch{Batch: s.Store.NewBatch(), t: s.t}
}

type tallySnapshot struct {
	storage.Snapshot
	r tallyReader
}

func (s tallySnapshot) Get(ctx context.Context, key []byte) ([]byte, error) { return s.r.Get(ctx, key) }

func (s tallySnapshot) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return s.r.NewIterator(ctx, lower, upper, reverse)
}

type tallyBatch struct {
	storage.Batch
	t                    *tally
	sets, deletes, bytes int64
}

func (b *tallyBatch) Get(ctx context.Context, key []byte) ([]byte, error) {
	return tallyReader{b.Batch, b.t}.Get(ctx, key)
}

func (b *tallyBatch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return tallyReader{b.Batch, b.t}.NewIterator(ctx, lower, upper, reverse)
}

func (b *tallyBatch) Set(key, value []byte) error {
	b.sets++
	b.bytes += int64(len(key) + len(value))
	return b.Batch.Set(key, value)
}

// Insert is the store's Insert where it has one (memory's), else Set.
func (b *tallyBatch) Insert(key, value []byte) error {
	b.sets++
	b.bytes += int64(len(key) + len(value))
	return storage.Insert(b.Batch, key, value)
}

func (b *tallyBatch) Delete(key []byte) error {
	b.deletes++
	return b.Batch.Delete(key)
}

func (b *tallyBatch) committed() {
	b.t.sets.Add(b.sets)
	b.t.deletes.Add(b.deletes)
	b.t.bytes.Add(b.bytes)
}

func (b *tallyBatch) Commit(ctx context.Context) error {
	err := b.Batch.Commit(ctx)
	if err == nil {
		b.committed()
	}
	return err
}

func (b *tallyBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	wait, err := b.Batch.CommitPipelined(ctx)
	if err == nil {
		b.committed()
	}
	return wait, err
}

// The budget file: lines "STORE KIND COUNT VALUE", # comments.

// readBudget reads the budget file: its counts by "STORE KIND COUNT", and
// the toolchain its allocations were counted with.
func readBudget(path string) (map[string]float64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	out := map[string]float64{}
	toolchain := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) == 3 && fs[0] == "toolchain" {
			toolchain = fs[1] + " " + fs[2]
			continue
		}
		if len(fs) != 4 {
			return nil, "", fmt.Errorf("%s:%d: %q is not STORE KIND COUNT VALUE", path, n, line)
		}
		v, err := strconv.ParseFloat(fs[3], 64)
		if err != nil {
			return nil, "", fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out[strings.Join(fs[:3], " ")] = v
	}
	return out, toolchain, sc.Err()
}

// thisToolchain is the Go release and architecture allocations are
// counted with here: another compiles the request path to other
// allocations.
func thisToolchain() string { return runtime.Version() + " " + runtime.GOARCH }

// budgetHeader opens the budget file.
const budgetHeader = `# What one request of each kind costs the whole server (TLS, net/http, the
# server, the engine, the store), in counts that do not move with the
# machine's load: STORE KIND COUNT VALUE, after the Go release and
# architecture the allocations were counted with. instance's
# *CountedBudget tests (budget_test.go says how each is counted) fail when
# a count grows past its budget (allocations and syncs by more than their
# stated tolerance, the others by anything) and log when one drops below
# it. Refresh after a change that moves a count, and say why in its commit:
#
#   ORRERY_WRITE_BUDGET=1 go test ./instance -run CountedBudget
#
# create: upsert of a new item; upsert: over an existing one; read: point
# read; replace: with If-Match; patch: incr of one item; query: one
# partition, one item of ten matching through an index. Items of ~300
# bytes, each write in a later second than the one before, one client.
`

func writeBudget(path string, budget map[string]float64) error {
	var b strings.Builder
	b.WriteString(budgetHeader)
	fmt.Fprintf(&b, "toolchain %s\n", thisToolchain())
	for _, key := range sortedBudgetKeys(budget) {
		fmt.Fprintf(&b, "%s %s\n", key, formatCount(key, budget[key]))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func sortedBudgetKeys(m map[string]float64) []string {
	rank := func(list []string, s string) int {
		if i := slices.Index(list, s); i >= 0 {
			return i
		}
		return len(list)
	}
	kindRank := func(name string) int {
		if i := slices.IndexFunc(budgetKinds, func(k budgetKind) bool { return k.name == name }); i >= 0 {
			return i
		}
		return len(budgetKinds)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		fa, fb := strings.Fields(a), strings.Fields(b)
		return cmp.Or(
			cmp.Compare(rank(budgetStores, fa[0]), rank(budgetStores, fb[0])),
			cmp.Compare(kindRank(fa[1]), kindRank(fb[1])),
			cmp.Compare(rank(budgetCounts, fa[2]), rank(budgetCounts, fb[2])),
			strings.Compare(a, b))
	})
	return keys
}

func formatCount(key string, v float64) string {
	if strings.HasSuffix(key, " allocs/op") {
		v = math.Round(v*100) / 100
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
