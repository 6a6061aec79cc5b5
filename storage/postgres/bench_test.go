package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// benchStore opens a store holding n keys k0000.. for a benchmark.
func benchStore(b *testing.B, n int) *postgres.Store {
	ctx := b.Context()
	b.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	batch := s.NewBatch()
	for i := range n {
		batch.Set(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "value %d", i))
	}
	if err := batch.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// loop runs op b.N times and reports, besides the mean, the median latency
// (p50-ns/op), which a loaded machine's stalls move less.
func loop(b *testing.B, op func()) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		op()
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/op")
}

// BenchmarkIterator reads a short range (10 keys, one page: the common case
// of a point-ish query page) and a long one (1,000 keys, four pages)
// through Store.NewIterator.
func BenchmarkIterator(b *testing.B) {
	ctx := b.Context()
	s := benchStore(b, 2000)
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			upper := fmt.Appendf(nil, "k%04d", 500+n)
			loop(b, func() {
				it, err := s.NewIterator(ctx, []byte("k0500"), upper, false)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for it.Next() {
					got++
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
				it.Close()
				if got != n {
					b.Fatalf("%d keys, want %d", got, n)
				}
			})
		})
	}
}

// BenchmarkShortRangeOptions measures, with the store's pool, what each way
// of reading a one-page range so that a second page could continue in the
// same snapshot costs: a plain statement (no second page possible in its
// snapshot), a repeatable-read transaction begun in the same round trip as
// the statement and rolled back after, and a cursor likewise.
func BenchmarkShortRangeOptions(b *testing.B) {
	s := benchStore(b, 2000)
	ctx := context.Background()
	const sel = `SELECT k, v FROM orrery_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT 257`
	args := []any{[]byte("k0500"), []byte("k0510")}
	drain := func(b *testing.B, rows pgx.Rows) {
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		if n != 10 {
			b.Fatalf("%d rows", n)
		}
	}
	b.Run("plain-statement", func(b *testing.B) {
		loop(b, func() {
			rows, err := s.Pool().Query(ctx, sel, args...)
			if err != nil {
				b.Fatal(err)
			}
			drain(b, rows)
		})
	})
	// inTransaction sends begin, then stmt with the range's arguments, then
	// fetch if not empty, in one round trip, reads the rows of the last,
	// then rolls the transaction back.
	inTransaction := func(b *testing.B, begin, stmt, fetch string) {
		conn, err := s.Pool().Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Release()
		var q pgx.Batch
		q.Queue(begin)
		q.Queue(stmt, args...)
		execs := 1
		if fetch != "" {
			q.Queue(fetch)
			execs++
		}
		br := conn.SendBatch(ctx, &q)
		for range execs {
			if _, err := br.Exec(); err != nil {
				b.Fatal(err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			b.Fatal(err)
		}
		drain(b, rows)
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("repeatable-read-then-rollback", func(b *testing.B) {
		loop(b, func() { inTransaction(b, `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, sel, "") })
	})
	b.Run("cursor-then-rollback", func(b *testing.B) {
		loop(b, func() { inTransaction(b, `BEGIN READ ONLY`, `DECLARE c NO SCROLL CURSOR FOR `+sel, `FETCH 256 FROM c`) })
	})
}

// BenchmarkQueryPageSnapshot is what a query page in one partition asks of
// the store: a snapshot opened with the catalog version's read, a page of
// 10 index entries, the 10 items they name, and the snapshot's close (four
// round trips). Besides the time it reports this process's CPU per page
// (cpu-µs/op, user and system: the gateway's side of the round trips).
func BenchmarkQueryPageSnapshot(b *testing.B) {
	ctx := b.Context()
	s := benchStore(b, 2000)
	items := make([][]byte, 10)
	for i := range items {
		items[i] = fmt.Appendf(nil, "k%04d", 1000+i)
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	loop(b, func() {
		snap, _, _, err := s.SnapshotAll(ctx, [][]byte{[]byte("k0001")})
		if err != nil {
			b.Fatal(err)
		}
		it, err := snap.NewIterator(ctx, []byte("k0500"), []byte("k0510"), false)
		if err != nil {
			b.Fatal(err)
		}
		for it.Next() {
		}
		if err := it.Err(); err != nil {
			b.Fatal(err)
		}
		it.Close()
		if _, err := snap.(storage.MultiGetter).GetMany(ctx, items); err != nil {
			b.Fatal(err)
		}
		if err := snap.Close(); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procIO is this process's read(2) and write(2) calls so far (syscr and
// syscw of /proc/self/io; 0, 0 where there is none).
func procIO() (reads, writes int64) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(value, 10, 64)
		switch name {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// measured runs op b.N times as loop does and reports this process's CPU
// (cpu-µs/op: the gateway's side of the round trips) and its read(2) and
// write(2) calls per operation (exact counts: each round trip is one
// write and one read or more, a read that finds nothing yet being one),
// and, when the server runs on this machine, the CPU of s's database's
// backends (pg-cpu-µs/op: PostgreSQL's side, one client's statements, not
// the server benchmark's 16 clients' lock waits and shared syncs).
func measured(b *testing.B, s *postgres.Store, op func()) {
	b.ReportAllocs()
	pg0, pgOK := backendsCPU(b, s, nil)
	r0, w0 := procIO()
	cpu0 := processCPU()
	loop(b, op)
	cpu := processCPU() - cpu0
	r1, w1 := procIO()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
	b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
	if pg1, ok := backendsCPU(b, s, pg0); ok && pgOK {
		var d time.Duration
		for pid, t := range pg1 {
			d += t - pg0[pid] // a backend started meanwhile counts from 0
		}
		b.ReportMetric(float64(d)/1e3/float64(b.N), "pg-cpu-µs/op")
	}
}

// backendsCPU is the CPU time (user and system, from /proc) of each
// backend connected to s's database, by process id, and of those of was
// that have ended since (their last reading: a pooled connection closed
// meanwhile stops counting); ok is false when they cannot be read (the
// server on another machine).
func backendsCPU(b *testing.B, s *postgres.Store, was map[int]time.Duration) (cpu map[int]time.Duration, ok bool) {
	rows, err := s.Pool().Query(b.Context(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	cpu = maps.Clone(was)
	if cpu == nil {
		cpu = map[int]time.Duration{}
	}
	tick := time.Second / 100 // USER_HZ
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, false
		}
		// The fields after the command's closing parenthesis: utime and
		// stime are the 14th and 15th of the line, the 12th and 13th here.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 13 {
			return nil, false
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cpu[int(pid)] = time.Duration(u+st) * tick
	}
	return cpu, true
}

// BenchmarkItemCalls is what a point read and an item write ask of the
// store, as the engine's shared seam asks it: a point read is GetAll of
// the catalog's version and the item (one round trip); a write is a
// shared batch's Begin with the catalog's shared lock, the partition's
// exclusive one, the version and the item read and the id (one round
// trip), then its keys (an item's record and a dozen index, feed and
// order keys, 1 KiB of value) and a deletion, committed with the
// watermark (one round trip). Besides the time it reports this process's
// CPU (the gateway's side), its read(2) and write(2) calls per call and
// PostgreSQL's backends' CPU per call.
func BenchmarkItemCalls(b *testing.B) {
	ctx := b.Context()
	s := benchStore(b, 2000)
	version, item := []byte("k0001"), []byte("k0002")
	b.Run("PointRead", func(b *testing.B) {
		measured(b, s, func() {
			if _, _, err := s.GetAll(ctx, [][]byte{version, item}); err != nil {
				b.Fatal(err)
			}
		})
	})
	locks := []storage.LockRequest{{Key: []byte("catalog")}, {Key: []byte("partition"), Exclusive: true}}
	value := make([]byte, 1024)
	// Write sets every key as main's engine did; WriteInserting writes
	// the 12 keys that carry the write's id as new (storage.Insert: a
	// plain INSERT), as the engine does now. Both report PostgreSQL's WAL
	// bytes per write (wal-bytes/op: the server's insert position moved,
	// the whole server's, which nothing else writes to meanwhile).
	for _, inserting := range []bool{false, true} {
		name := "Write"
		if inserting {
			name = "WriteInserting"
		}
		b.Run(name, func(b *testing.B) {
			i := 0
			// The keys and values are built in buffers reused from one write
			// to the next (a batch copies what it is given), so the
			// allocations reported are the store's.
			var kbuf, vbuf []byte
			lsn0 := walInsertLSN(b, s)
			measured(b, s, func() {
				batch, err := s.NewSharedBatch(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer batch.Close()
				if _, err := batch.Begin(ctx, locks, [][]byte{version, item}, true); err != nil {
					b.Fatal(err)
				}
				seq, err := batch.Sequence(ctx)
				if err != nil {
					b.Fatal(err)
				}
				batch.Set(item, value)
				for k := range 12 {
					kbuf = strconv.AppendUint(append(append(kbuf[:0], "idx/"...), byte('a'+k), '/'), seq, 10)
					vbuf = strconv.AppendInt(append(vbuf[:0], "entry "...), int64(i), 10)
					if inserting {
						storage.Insert(batch, kbuf, vbuf)
					} else {
						batch.Set(kbuf, vbuf)
					}
				}
				kbuf = strconv.AppendUint(append(kbuf[:0], "idx/a/"...), seq-1, 10)
				batch.Delete(kbuf)
				if _, err := batch.CommitWatermark(ctx); err != nil {
					b.Fatal(err)
				}
				i++
			})
			b.ReportMetric(float64(walInsertLSN(b, s)-lsn0)/float64(b.N), "wal-bytes/op")
		})
	}
}

// walInsertLSN is the server's WAL insert position, in bytes.
func walInsertLSN(b *testing.B, s *postgres.Store) int64 {
	var n int64
	if err := s.Pool().QueryRow(b.Context(), `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
