package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// benchClients is the number of SDK clients that load a server at once,
// each with a connection of its own.
const benchClients = 16

// benchItems is the number of items a server holds before it is measured.
const benchItems = 1000

// BenchmarkServer measures what one request of each kind costs the whole
// server: the orrery binary runs as a child process, serving HTTPS, and 16
// clients of the official Go SDK, each on its own connection, send
// upserts, point reads, reads followed by a replace with If-Match, patches
// incrementing one hot item, and queries within one partition. Besides the
// time per operation it reports the operations per second and the
// server's CPU (user and system, from /proc/<pid>/stat) per operation,
// the figure the CPU budget is kept in, each operation's latency as the
// client sees it (p50-µs, p99-µs) and, for a server on Pebble, the
// write-ahead log syncs per operation (syncs/op: below 1 when concurrent
// writes share a sync).
//
// It measures the binary built from this tree (or ORRERY_BENCH_BIN) on
// each store of ORRERY_BENCH_STORES (default "pebble,memory"; "postgres"
// adds PostgreSQL, whose own processes' CPU is reported as
// pg-cpu-µs/op; with ORRERY_BENCH_PG_STATEMENTS set, each kind also
// prints on stderr PostgreSQL's CPU per operation by process, its time per
// operation in each statement (pg_stat_statements) and the rows each
// operation inserted, updated and deleted; with ORRERY_BENCH_PG_SOCKET
// set, the gateway connects through PostgreSQL's Unix socket instead of
// TCP), and in the same run, when given:
//
//   - ORRERY_BENCH_BASE: another orrery binary (the previous release or
//     commit), as base-<store>;
//   - ORRERY_BENCH_COSMIUM: a cosmium binary (github.com/pikami/cosmium,
//     cmd/server), in memory as cosmium-memory and on Badger as
//     cosmium-badger.
//
// The servers are measured one after another, in that order, or in the
// reverse order with ORRERY_BENCH_ORDER=reverse: a machine that drifts
// over a run favours one end of the list, so a table comparing them is a
// run in each order.
//
// ORRERY_BENCH_CLIENTS sets how many of the 16 clients send the measured
// operations (1: a serial client's latency); ORRERY_BENCH_ARGS adds flags
// to the orrery servers' command line (e.g. "--wal-min-sync-interval 500us").
//
// With ORRERY_BENCH_PROFILE set to a directory, the binary under test
// serves --pprof and each kind's measurement writes there the server's CPU
// profile over its first ORRERY_BENCH_PROFILE_SECONDS (default 5; give a
// count that lasts longer, e.g. -benchtime 20000x) and its allocation
// profiles before and after (compare them with go tool pprof -base).
//
// Run it with a time per kind of a few seconds (the CPU clock ticks every
// 10 ms), e.g.
//
//	go test ./cmd/orrery -run '^$' -bench BenchmarkServer -benchtime 5s
//
// bench/compare.sh compares two commits with it.
func BenchmarkServer(b *testing.B) {
	bin := os.Getenv("ORRERY_BENCH_BIN")
	if bin == "" {
		bin = buildBinary(b)
	}
	stores := strings.Split(envOr("ORRERY_BENCH_STORES", "pebble,memory"), ",")
	type target struct {
		name  string
		start func(b *testing.B) *benchProc
	}
	var targets []target
	add := func(prefix, bin string, profile bool) {
		for _, st := range stores {
			st := strings.TrimSpace(st)
			targets = append(targets, target{prefix + "-" + st, func(b *testing.B) *benchProc {
				p := startOrrery(b, bin, st, profile)
				p.name = prefix + "-" + st
				return p
			}})
		}
	}
	add("orrery", bin, os.Getenv("ORRERY_BENCH_PROFILE") != "")
	if base := os.Getenv("ORRERY_BENCH_BASE"); base != "" {
		add("base", base, false)
	}
	if cosmium := os.Getenv("ORRERY_BENCH_COSMIUM"); cosmium != "" {
		targets = append(targets,
			target{"cosmium-memory", func(b *testing.B) *benchProc { return startCosmium(b, cosmium, false) }},
			target{"cosmium-badger", func(b *testing.B) *benchProc { return startCosmium(b, cosmium, true) }})
	}
	if os.Getenv("ORRERY_BENCH_ORDER") == "reverse" {
		// A run's servers are measured one after another, so a machine
		// that drifts over the run favours one end of the list: a table
		// is a run in each order (the README's commands).
		slices.Reverse(targets)
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			p := tg.start(b)
			defer p.stop()
			runKinds(b, p)
		})
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// benchProc is a server process under measurement.
type benchProc struct {
	name     string
	cmd      *exec.Cmd
	profiles string // where to write profiles; empty: none
	endpoint string // https://host:port/
	// pg, when set, is the PostgreSQL server the process stores in, and
	// pgURL its database.
	pg    *pgtest.Server
	pgURL string
}

func (p *benchProc) stop() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// childSyscalls is the number of read and write system calls process pid
// has made (syscr and syscw of /proc/<pid>/io: read(2), write(2) and
// their kin, each whether it moved bytes or not), 0 where /proc does not
// tell.
func childSyscalls(pid int) (reads, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		switch name {
		case "syscr":
			reads, _ = strconv.ParseInt(value, 10, 64)
		case "syscw":
			writes, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return reads, writes
}

// cpu is the CPU time the process has used, in seconds.
func (p *benchProc) cpu(b *testing.B) float64 {
	b.Helper()
	d, err := childCPU(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return d.Seconds()
}

// startOrrery starts bin serving on store (pebble, memory or postgres)
// with its defaults otherwise: fsync, indexes, the change feed, metrics and
// the access log on.
func startOrrery(b *testing.B, bin, store string, profile bool) *benchProc {
	b.Helper()
	var args []string
	if profile {
		args = append(args, "--pprof")
	}
	var pg *pgtest.Server
	var pgURL string
	switch store {
	case "pebble":
		args = append(args, "--data", b.TempDir())
	case "memory":
		args = append(args, "--memory")
	case "postgres":
		if err := pgtest.Available(); err != nil {
			b.Skipf("PostgreSQL cannot be used: %v", err)
		}
		opts := pgtest.Options{Durable: true}
		if os.Getenv("ORRERY_BENCH_PG_STATEMENTS") != "" {
			opts.Settings = []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}
		}
		pg = pgtest.NewServer(b, opts)
		pgURL = pg.URL(b)
		if os.Getenv("ORRERY_BENCH_PG_SOCKET") != "" {
			// Through the server's Unix socket, not TCP on the loopback.
			pgURL += "?host=" + url.QueryEscape(pg.Dir())
		}
		args = append(args, "--postgres", pgURL, "--postgres-pool", "16")
	default:
		b.Fatalf("ORRERY_BENCH_STORES: unknown store %q", store)
	}
	args = append(args, strings.Fields(os.Getenv("ORRERY_BENCH_ARGS"))...)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.SysProcAttr = benchChildAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		// The access log goes on: read it as a terminal or a collector
		// would, without looking at it.
		io.Copy(io.Discard, stderr)
	}()
	p := &benchProc{cmd: cmd, pg: pg, pgURL: pgURL}
	if profile {
		p.profiles = os.Getenv("ORRERY_BENCH_PROFILE")
	}
	select {
	case a := <-addr:
		p.endpoint = "https://" + a + "/"
	case <-time.After(30 * time.Second):
		p.stop()
		b.Fatal("orrery did not report ready within 30 s")
	}
	return p
}

// startCosmium starts cosmium on a free loopback port, in memory or, with
// badger, on Badger in a temporary directory.
func startCosmium(b *testing.B, bin string, badger bool) *benchProc {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"-Host", "127.0.0.1", "-Port", strconv.Itoa(port), "-AccountKey", server.EmulatorKey}
	if badger {
		args = append(args, "-DataStore", "badger", "-Persist", b.TempDir())
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = benchChildAttr()
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &benchProc{cmd: cmd, endpoint: fmt.Sprintf("https://127.0.0.1:%d/", port)}
	hc := benchHTTPClient()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := hc.Get(p.endpoint)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			p.stop()
			b.Fatalf("cosmium did not answer within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// benchHTTPClient is one client's connection to a server whose certificate
// is self-signed.
func benchHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		MaxIdleConnsPerHost: 4,
		ForceAttemptHTTP2:   false,
	}}
}

// benchContainers makes one Go SDK client per load client and returns
// their handles on db/c, creating it.
func benchContainers(b *testing.B, endpoint string) []*azcosmos.ContainerClient {
	b.Helper()
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		b.Fatal(err)
	}
	var conts []*azcosmos.ContainerClient
	for i := range benchClients {
		opts := &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{Transport: benchHTTPClient()}}
		c, err := azcosmos.NewClientWithKey(endpoint, cred, opts)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			ctx := context.Background()
			if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "bench"}, nil); err != nil {
				b.Fatal(err)
			}
			db, _ := c.NewDatabase("bench")
			if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
				PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
				b.Fatal(err)
			}
		}
		cont, err := c.NewContainer("bench", "c")
		if err != nil {
			b.Fatal(err)
		}
		conts = append(conts, cont)
	}
	return conts
}

// benchPK spreads the items over 10 logical partitions.
func benchPK(i int) string { return "p" + strconv.Itoa(i%10) }

// benchDoc is an item of about 300 bytes.
func benchDoc(id string, pk string, n int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"pk":%q,"n":%d,"tags":["a","b","c"],"nested":{"x":%d,"y":"yy"},"payload":"%s"}`,
		id, pk, n, n%7, strings.Repeat("x", 200))
}

// benchKind is a request kind: do sends one operation.
type benchKind struct {
	name string
	do   func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error
}

func runKinds(b *testing.B, p *benchProc) {
	conts := benchContainers(b, p.endpoint)
	ctx := context.Background()
	// Seed: benchItems items r0… and the hot item, written by all clients.
	var wg sync.WaitGroup
	var seedErr atomic.Pointer[error]
	for w := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchItems; i += benchClients {
				id := "r" + strconv.Itoa(i)
				if _, err := conts[w].UpsertItem(ctx, azcosmos.NewPartitionKeyString(benchPK(i)), benchDoc(id, benchPK(i), i), nil); err != nil {
					seedErr.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := seedErr.Load(); err != nil {
		b.Fatal(*err)
	}
	hot := azcosmos.NewPartitionKeyString("hot")
	if _, err := conts[0].UpsertItem(ctx, hot, []byte(`{"id":"hot","pk":"hot","n":0}`), nil); err != nil {
		b.Fatal(err)
	}
	kinds := []benchKind{
		{"upsert", func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error {
			i := r.IntN(10 * benchItems)
			id := "u" + strconv.Itoa(i)
			_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(benchPK(i)), benchDoc(id, benchPK(i), r.IntN(1000)), nil)
			return err
		}},
		{"read", func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error {
			i := r.IntN(benchItems)
			_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(benchPK(i)), "r"+strconv.Itoa(i), nil)
			return err
		}},
		{"replace", func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error {
			i := r.IntN(benchItems)
			id, pk := "r"+strconv.Itoa(i), azcosmos.NewPartitionKeyString(benchPK(i))
			got, err := c.ReadItem(ctx, pk, id, nil)
			if err != nil {
				return err
			}
			etag := got.ETag
			_, err = c.ReplaceItem(ctx, pk, id, benchDoc(id, benchPK(i), r.IntN(1000)), &azcosmos.ItemOptions{IfMatchEtag: &etag})
			if isStatus(err, http.StatusPreconditionFailed) {
				return errConflict
			}
			return err
		}},
		{"patch", func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error {
			var ops azcosmos.PatchOperations
			ops.AppendIncrement("/n", 1)
			_, err := c.PatchItem(ctx, hot, "hot", ops, nil)
			return err
		}},
		{"query", func(ctx context.Context, c *azcosmos.ContainerClient, r *rand.Rand) error {
			i := r.IntN(benchItems)
			pager := c.NewQueryItemsPager("SELECT * FROM c WHERE c.n = @n",
				azcosmos.NewPartitionKeyString(benchPK(i)),
				&azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{{Name: "@n", Value: i}}})
			for pager.More() {
				if _, err := pager.NextPage(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	if only := os.Getenv("ORRERY_BENCH_KINDS"); only != "" {
		var keep []benchKind
		for _, k := range kinds {
			if strings.Contains(","+only+",", ","+k.name+",") {
				keep = append(keep, k)
			}
		}
		kinds = keep
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) { measureKind(b, p, conts, k) })
	}
}

// errConflict is a replace that lost a race with another client's (412):
// an answer, counted apart from errors.
var errConflict = errors.New("precondition failed")

// measureKind sends b.N operations of kind k from all clients at once and
// reports ops/s, the server's CPU per operation, and the errors.
func measureKind(b *testing.B, p *benchProc, conts []*azcosmos.ContainerClient, k benchKind) {
	ctx := context.Background()
	var pg0 float64
	if p.pg != nil {
		pg0 = pgCPU(b, p.pg)
	}
	if p.pg != nil && os.Getenv("ORRERY_BENCH_PG_STATEMENTS") != "" {
		defer pgStatements(b, p.pg, p.pgURL)()
	}
	var profiled sync.WaitGroup
	if p.profiles != "" {
		prefix := filepath.Join(p.profiles, p.name+"-"+k.name)
		p.fetchProfile(b, "allocs", prefix+".allocs0.pprof")
		profiled.Add(1)
		go func() {
			defer profiled.Done()
			p.fetchProfile(b, "profile?seconds="+envOr("ORRERY_BENCH_PROFILE_SECONDS", "5"), prefix+".cpu.pprof")
		}()
		defer func() {
			profiled.Wait()
			p.fetchProfile(b, "allocs", prefix+".allocs1.pprof")
		}()
	}
	syncs0, hasSyncs := p.metric(walSyncsMetric)
	cpu0 := p.cpu(b)
	sysr0, sysw0 := childSyscalls(p.cmd.Process.Pid)
	var next, errs, conflicts atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	clients := benchClients
	if n, err := strconv.Atoi(os.Getenv("ORRERY_BENCH_CLIENTS")); err == nil && n >= 1 && n <= benchClients {
		clients = n
	}
	latencies := make([][]time.Duration, clients)
	b.ResetTimer()
	began := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(b.N)))
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				err := k.do(ctx, conts[w], r)
				latencies[w] = append(latencies[w], time.Since(start))
				switch {
				case err == nil:
				case errors.Is(err, errConflict):
					conflicts.Add(1)
				default:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(began).Seconds()
	b.StopTimer()
	cpu := p.cpu(b) - cpu0
	b.ReportMetric(float64(b.N)/wall, "ops/s")
	b.ReportMetric(cpu*1e6/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(errs.Load()), "errors")
	all := slices.Concat(latencies...)
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	if sysr, sysw := childSyscalls(p.cmd.Process.Pid); sysr > 0 {
		b.ReportMetric(float64(sysr-sysr0)/float64(b.N), "reads/op")
		b.ReportMetric(float64(sysw-sysw0)/float64(b.N), "writes/op")
	}
	// Read last: the request for it is no operation's.
	if syncs1, ok := p.metric(walSyncsMetric); ok && hasSyncs {
		b.ReportMetric((syncs1-syncs0)/float64(b.N), "syncs/op")
	}
	if k.name == "replace" {
		b.ReportMetric(float64(conflicts.Load()), "412s")
	}
	if p.pg != nil {
		b.ReportMetric((pgCPU(b, p.pg)-pg0)*1e6/float64(b.N), "pg-cpu-µs/op")
	}
	if err := firstErr.Load(); err != nil {
		b.Logf("%d of %d operations failed; the first: %v", errs.Load(), b.N, *err)
	}
}

// walSyncsMetric counts a Pebble store's write-ahead log syncs.
const walSyncsMetric = "orrery_storage_wal_syncs_total"

// metric is the value of the server's Prometheus metric name (a series
// without labels), and whether the server reports it.
func (p *benchProc) metric(name string) (float64, bool) {
	req, _ := http.NewRequest("GET", p.endpoint+"metrics", nil)
	req.Header.Set("Authorization", "Bearer "+server.EmulatorKey)
	resp, err := benchHTTPClient().Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// fetchProfile saves the server's profile (a path under /debug/pprof/) to
// file.
func (p *benchProc) fetchProfile(b *testing.B, profile, file string) {
	req, _ := http.NewRequest("GET", p.endpoint+"debug/pprof/"+profile, nil)
	req.Header.Set("Authorization", "Bearer "+server.EmulatorKey)
	resp, err := benchHTTPClient().Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, body)
	}
	if err == nil {
		err = os.WriteFile(file, body, 0o644)
	}
	if err != nil {
		b.Errorf("profile %s: %v", profile, err)
	}
}
