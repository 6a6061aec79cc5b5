package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/jackc/pgx/v5"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// BenchmarkGateways measures point reads, upserts and patches of one hot
// item through the Go SDK, 16 clients at once, against one gateway on
// Pebble and 1 and 3 gateways on one PostgreSQL database, durable (fsync
// on, PostgreSQL's defaults) and not (fsync off). Besides the time per
// operation it reports latency percentiles, and on PostgreSQL the server's
// CPU per operation, the cores it kept busy (where that nears the
// machine's, PostgreSQL is the ceiling) and the write transactions
// (transaction ids) per operation. Run it with a fixed count, e.g. -benchtime=2000x: the setup of
// each configuration (initdb, gateways, 1,000 items) is not timed but
// takes seconds.
func BenchmarkGateways(b *testing.B) {
	type config struct {
		name     string
		gateways int
		pg       *pgtest.Options // nil: Pebble
	}
	configs := []config{
		{"pebble-1", 1, nil},
		{"pg-fsync-1", 1, &pgtest.Options{Durable: true}},
		{"pg-fsync-3", 3, &pgtest.Options{Durable: true}},
		{"pg-nofsync-1", 1, &pgtest.Options{}},
		{"pg-nofsync-3", 3, &pgtest.Options{}},
	}
	for _, cfg := range configs {
		b.Run(cfg.name, func(b *testing.B) {
			var f *pgFleet
			var pg *pgtest.Server
			var url string
			if cfg.pg == nil {
				f = startGateways(b, cfg.gateways, "--data", b.TempDir())
			} else {
				if err := pgtest.Available(); err != nil {
					b.Skipf("PostgreSQL cannot be used: %v", err)
				}
				pg = pgtest.NewServer(b, *cfg.pg)
				url = pg.URL(b)
				f = startGateways(b, cfg.gateways, "--postgres", url, "--postgres-pool", "16")
			}
			ctx := context.Background()
			const items = 1000
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < items; i += 8 {
						id := "r" + strconv.Itoa(i)
						body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":0,"payload":"%s"}`, id, pkOf(id), strings.Repeat("x", 200))
						if _, err := f.conts[i%len(f.conts)].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), []byte(body), nil); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if b.Failed() {
				return
			}
			hot := azcosmos.NewPartitionKeyString("hot")
			if _, err := f.conts[0].UpsertItem(ctx, hot, []byte(`{"id":"hot","pk":"hot","n":0}`), nil); err != nil {
				b.Fatal(err)
			}
			ops := []struct {
				name string
				do   func(c *azcosmos.ContainerClient, r *rand.Rand) error
			}{
				{"point-read", func(c *azcosmos.ContainerClient, r *rand.Rand) error {
					id := "r" + strconv.Itoa(r.IntN(items))
					_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), id, nil)
					return err
				}},
				{"upsert", func(c *azcosmos.ContainerClient, r *rand.Rand) error {
					id := "u" + strconv.Itoa(r.IntN(10*items))
					body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":%d,"payload":"%s"}`, id, pkOf(id), r.IntN(1000), strings.Repeat("y", 200))
					_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), []byte(body), nil)
					return err
				}},
				{"hot-patch", func(c *azcosmos.ContainerClient, r *rand.Rand) error {
					var p azcosmos.PatchOperations
					p.AppendIncrement("/n", 1)
					_, err := c.PatchItem(ctx, hot, "hot", p, nil)
					return err
				}},
			}
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					var cpu0, xid0 float64
					if pg != nil {
						cpu0, xid0 = pgCPU(b, pg), pgXID(b, url)
					}
					began := time.Now()
					var next atomic.Int64
					var mu sync.Mutex
					var lat []time.Duration
					b.SetParallelism(8) // 16 clients on 2 cores
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						n := next.Add(1)
						c := f.conts[int(n)%len(f.conts)]
						r := rand.New(rand.NewPCG(uint64(n), 1))
						var mine []time.Duration
						for pb.Next() {
							start := time.Now()
							if err := op.do(c, r); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(start))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
					b.StopTimer()
					wall := time.Since(began).Seconds()
					slices.Sort(lat)
					if len(lat) > 0 {
						b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
						b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
					}
					if pg != nil {
						cpu := pgCPU(b, pg) - cpu0
						b.ReportMetric(cpu*1e6/float64(b.N), "pg-cpu-µs/op")
						b.ReportMetric(cpu/wall, "pg-cores")
						b.ReportMetric((pgXID(b, url)-xid0-1)/float64(b.N), "pg-xacts/op")
					}
				})
			}
		})
	}
}

// pgCPU returns the CPU seconds (user and system) PostgreSQL's processes
// have used: the postmaster, its children alive, and those it reaped.
func pgCPU(b *testing.B, pg *pgtest.Server) float64 {
	b.Helper()
	total := 0.0
	for _, v := range pgCPUByProcess(b, pg) {
		total += v
	}
	return total
}

// pgCPUByProcess is pgCPU by kind of process: "backends" (the sessions
// of clients), each background process by its title (walwriter,
// checkpointer, autovacuum worker, ...), and "postmaster" (its own and
// that of the children it reaped).
func pgCPUByProcess(b *testing.B, pg *pgtest.Server) map[string]float64 {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(pg.Dir(), "data", "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	fields := func(pid string) []string {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return nil
		}
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			return nil
		}
		return strings.Fields(string(st[i+1:]))
	}
	ticks := func(f []string, at ...int) float64 {
		var sum float64
		for _, i := range at {
			v, _ := strconv.ParseFloat(f[i], 64)
			sum += v
		}
		return sum / 100 // clock ticks
	}
	by := map[string]float64{}
	if f := fields(strconv.Itoa(pid)); len(f) > 14 {
		by["postmaster"] += ticks(f, 11, 12, 13, 14) // its own, and its reaped children's
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if f := fields(p.Name()); len(f) > 12 && f[1] == strconv.Itoa(pid) {
			kind := "backends"
			if title, err := os.ReadFile("/proc/" + p.Name() + "/cmdline"); err == nil && !bytes.Contains(title, []byte("(")) {
				kind = strings.TrimSpace(strings.TrimPrefix(string(bytes.TrimRight(title, "\x00")), "postgres: "))
			}
			by[kind] += ticks(f, 11, 12)
		}
	}
	return by
}

// pgXID returns the next transaction id of url's server (and uses one):
// the difference over a run is the write transactions it committed.
func pgXID(b *testing.B, url string) float64 {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return float64(n)
}

// pgStatements resets PostgreSQL's statistics of statements
// (pg_stat_statements, which ORRERY_BENCH_PG_STATEMENTS preloads) and
// returns a function that logs them per operation: for each statement the
// times it ran, the server's time in it (planning and execution, a lock's
// wait included) and the rows it returned or wrote, what the server's CPU
// per operation is spent on.
func pgStatements(b *testing.B, pg *pgtest.Server, url string) func() {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatal(err)
	}
	tuples := func() (t [5]int64) {
		// Stale by up to a second (each backend's counters reach the
		// view when it flushes them).
		conn.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, 0 FROM pg_stat_user_tables WHERE relname = 'orrery_kv'`).
			Scan(&t[0], &t[1], &t[2], &t[3], &t[4])
		return t
	}
	// The WAL's writes and syncs (pg_stat_wal, PostgreSQL 14 to 17):
	// how many commits share one sync, what a commit costs the server
	// beside its statements. Counted by the process that wrote or synced,
	// a backend committing or the WAL writer; ok is false where the view
	// has no such columns.
	walIO := func() (w [2]float64, ok bool) {
		err := conn.QueryRow(ctx, `SELECT wal_write::float8, wal_sync::float8 FROM pg_stat_wal`).Scan(&w[0], &w[1])
		return w, err == nil
	}
	t0, cpu0 := tuples(), pgCPUByProcess(b, pg)
	w0, walOK := walIO()
	return func() {
		defer conn.Close(ctx)
		cpu1 := pgCPUByProcess(b, pg)
		time.Sleep(1100 * time.Millisecond)
		t1 := tuples()
		n := float64(b.N)
		var split []string
		for kind, v := range cpu1 {
			if d := v - cpu0[kind]; d > 0 {
				split = append(split, fmt.Sprintf("%s %.1f", kind, d*1e6/n))
			}
		}
		slices.Sort(split)
		fmt.Fprintf(os.Stderr, "%s: PostgreSQL's CPU µs per operation by process: %s\n", b.Name(), strings.Join(split, ", "))
		fmt.Fprintf(os.Stderr, "%s: orrery_kv rows per operation: %.2f inserted, %.2f updated (%.2f of them HOT), %.2f deleted\n", b.Name(),
			float64(t1[0]-t0[0])/n, float64(t1[1]-t0[1])/n, float64(t1[2]-t0[2])/n, float64(t1[3]-t0[3])/n)
		// WAL written by the statements (exact: counted as each ends).
		var walRecords, walBytes float64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(wal_records), 0)::float8, coalesce(sum(wal_bytes), 0)::float8
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&walRecords, &walBytes); err != nil {
			b.Error(err)
			return
		}
		fmt.Fprintf(os.Stderr, "%s: WAL per operation: %.2f records, %.0f bytes\n", b.Name(), walRecords/n, walBytes/n)
		if w1, ok := walIO(); ok && walOK {
			writes, syncs := w1[0]-w0[0], w1[1]-w0[1]
			fmt.Fprintf(os.Stderr, "%s: WAL writes per operation %.3f, syncs %.3f", b.Name(), writes/n, syncs/n)
			if syncs > 0 {
				fmt.Fprintf(os.Stderr, " (%.2f operations per sync)", n/syncs)
			}
			fmt.Fprintln(os.Stderr)
		}
		rows, err := conn.Query(ctx, `SELECT calls, total_exec_time + total_plan_time, rows, toplevel, wal_records, regexp_replace(query, '\s+', ' ', 'g')
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			ORDER BY total_exec_time + total_plan_time DESC LIMIT 14`)
		if err != nil {
			b.Error(err)
			return
		}
		defer rows.Close()
		var out strings.Builder
		fmt.Fprintf(&out, "PostgreSQL's statements over %d operations, per operation:\n%8s %9s %8s %8s  %s\n", b.N, "calls", "µs", "rows", "wal", "statement")
		for rows.Next() {
			var calls, nrows, wal int64
			var ms float64
			var top bool
			var q string
			if err := rows.Scan(&calls, &ms, &nrows, &top, &wal, &q); err != nil {
				b.Error(err)
				return
			}
			if !top {
				q = "  (nested) " + q
			}
			if len(q) > 110 {
				q = q[:110] + "…"
			}
			n := float64(b.N)
			fmt.Fprintf(&out, "%8.2f %9.1f %8.2f %8.2f  %s\n", float64(calls)/n, ms*1e3/n, float64(nrows)/n, float64(wal)/n, q)
		}
		// On stderr: a benchmark's log is cut to its first lines.
		fmt.Fprint(os.Stderr, b.Name()+": "+out.String())
	}
}
