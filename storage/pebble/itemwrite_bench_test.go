package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/orrery-db/orrery/storage"
)

// An itemLayout is a way of laying out an item's keys: the engine's
// (layoutToday), or one of the alternatives BenchmarkItemWrite prices
// before anyone builds one (ORRERY_BENCH_PEBBLE_LAYOUT names them).
type itemLayout struct {
	// ridIndex ends index entries with the item's 8-byte RID instead of
	// the item key suffix <epk><pk len 2><pk><id>.
	ridIndex bool
	// suffixValue, with ridIndex, keeps the item key suffix as the index
	// entry's value (a query then needs no RID lookup).
	suffixValue bool
	// noRID writes no RID entry R<coll rid><item rid>: 12 keys per create.
	noRID bool
}

var layoutToday itemLayout

// itemLayouts are the layouts ORRERY_BENCH_PEBBLE_LAYOUT may name.
var itemLayouts = map[string]itemLayout{
	"today":                  {},
	"rid-index":              {ridIndex: true},
	"rid-index-suffix-value": {ridIndex: true, suffixValue: true},
	"no-rid":                 {noRID: true},
	"rid-index-no-rid":       {ridIndex: true, noRID: true},
}

// itemKeysOf appends to ks the keys an item write of the engine sets for
// item id (the write numbered n) in layout l, shaped like
// engine/internal/keys lays them out in layoutToday: the item record, its
// feed, RID, change record and creation-order entries, and one index entry
// per path.
func itemKeysOf(ks [][]byte, id64, n uint64, l itemLayout) [][]byte {
	coll := []byte("\x00\x00\x00\x01\x00\x00\x00\x02")
	var rid [8]byte
	binary.BigEndian.PutUint64(rid[:], id64*2654435761)
	id := strconv.AppendUint([]byte("item-"), id64*7919%1000003, 10)
	pk := strconv.AppendUint([]byte("\x02pk-"), id64%97, 10)
	var epk [16]byte
	binary.BigEndian.PutUint64(epk[:], (id64%97)*0x9E3779B97F4A7C15)
	suffix := append(append(append(append([]byte{}, epk[:]...), byte(len(pk)>>8), byte(len(pk))), pk...), id...)
	item := append(append([]byte{'D'}, coll...), suffix...)
	var lsn [8]byte
	binary.BigEndian.PutUint64(lsn[:], n)
	ks = append(ks, item,
		append(append(append([]byte{'F'}, coll...), lsn[:]...), rid[:]...))
	if !l.noRID {
		ks = append(ks, append(append([]byte{'R'}, coll...), rid[:]...))
	}
	ks = append(ks,
		append(append(append([]byte{'V'}, coll...), lsn[:]...), 0, 0, 0, 0),
		append(append(append([]byte{'N'}, coll...), suffix[:len(suffix)-len(id)]...), rid[:]...))
	indexSuffix := suffix
	if l.ridIndex {
		indexSuffix = rid[:]
	}
	for p, path := range []string{"/id", "/pk", "/name", "/n", "/tags/[]", "/address/city", "/address/zip", "/_ts"} {
		k := append(append([]byte{'I'}, coll...), byte(len(path)))
		k = append(k, path...)
		k = strconv.AppendUint(append(k, 0x04), (n*uint64(p+3))%5000, 10)
		ks = append(ks, append(k, indexSuffix...))
	}
	return ks
}

// itemValue is the value the engine stores under k, a key of the item
// whose keys are ks, in layout l.
func itemValue(ks [][]byte, k, doc []byte, l itemLayout) []byte {
	switch k[0] {
	case 'D', 'V':
		return doc
	case 'F', 'R', 'N':
		return ks[0]
	case 'I':
		if l.suffixValue {
			return ks[0][1+8:]
		}
	}
	return nil
}

// itemWriteTunes are settings BenchmarkItemWrite compares with the store's
// own when ORRERY_BENCH_PEBBLE_TUNE names one (each was measured against
// the store's settings: see its commit and the README).
var itemWriteTunes = map[string]func(*Options){
	"mem4":  func(o *Options) { o.MemTableSize = 4 << 20 },
	"mem8":  func(o *Options) { o.MemTableSize = 8 << 20 },
	"mem32": func(o *Options) { o.MemTableSize = 32 << 20 },
	"l0-8": func(o *Options) {
		o.tune = func(p *pebbledb.Options) { p.L0CompactionThreshold, p.L0StopWritesThreshold = 8, 16 }
	},
	"l0-2": func(o *Options) {
		o.tune = func(p *pebbledb.Options) { p.L0CompactionThreshold = 2 }
	},
	"mem8-l0-8": func(o *Options) {
		o.MemTableSize = 8 << 20
		o.tune = func(p *pebbledb.Options) { p.L0CompactionThreshold, p.L0StopWritesThreshold = 8, 16 }
	},
	"file8m": func(o *Options) {
		o.tune = func(p *pebbledb.Options) { p.TargetFileSizes[0] = 8 << 20 }
	},
	"filter-last": func(o *Options) {
		o.tune = func(p *pebbledb.Options) { p.Levels[len(p.Levels)-1].FilterPolicy = bloom.FilterPolicy(10) }
	},
	// Pebble's default index: two-level past 4 KB of index.
	"index4k": func(o *Options) {
		o.tune = func(p *pebbledb.Options) {
			for i := range p.Levels {
				p.Levels[i].IndexBlockSize = 4 << 10
			}
		}
	},
	"rowblocks": func(o *Options) {
		o.tune = func(p *pebbledb.Options) { p.FormatMajorVersion = pebbledb.FormatFlushableIngestExcises }
	},
	"nocompress-upper": func(o *Options) {
		o.tune = func(p *pebbledb.Options) {
			for i := range p.Levels[:len(p.Levels)-2] {
				p.Levels[i].Compression = func() *block.CompressionProfile { return block.NoCompression }
			}
		}
	},
}

// BenchmarkItemWrite measures what the engine's item write costs the
// store, from 16 concurrent writers: a read of the item's key, then a
// pipelined, synced batch of its keys (see itemKeysOf). "create" writes new
// items; "overwrite" writes 10,000 items over and over, deleting each
// version's feed and index entries as the engine does, like the server's
// upsert and replace benchmarks; "replace" rewrites them as the engine's
// replace of a changed property does (7 operations; the first 10,000
// writes create the items). Besides the process's CPU per write (Pebble's
// flushes and compactions included, so run enough writes for
// several memtables: -benchtime 60000x) it reports exact counts per write:
// bytes written to the write-ahead log, flushed to tables, read and written
// by compactions, the store's size on disk, and at the end its read
// amplification.
//
// ORRERY_BENCH_PEBBLE_TUNE names other settings to measure instead of the
// store's (see itemWriteTunes). ORRERY_BENCH_PEBBLE_LAYOUT names another
// layout of the item's keys than the engine's (see itemLayouts): index
// entries ending in the item's RID ("rid-index", and
// "rid-index-suffix-value" with the item key suffix as their value), no
// RID entry ("no-rid"), or both ("rid-index-no-rid").
// ORRERY_BENCH_PEBBLE_ORDER=sorted adds a write's operations to its batch
// in key order (a stable sort, in the writer) instead of the engine's
// order (see BenchmarkItemApply). Alternate them within one run for CPU
// figures; the byte and comparison counts are exact.
func BenchmarkItemWrite(b *testing.B) {
	b.Run("create", func(b *testing.B) { benchItemWrite(b, 0, false) })
	b.Run("overwrite", func(b *testing.B) { benchItemWrite(b, 10_000, false) })
	b.Run("replace", func(b *testing.B) { benchItemWrite(b, 10_000, true) })
}

// replaced reports whether an engine replace that changes the item's n
// rewrites k: the item, its feed entry and the index entries of /n and
// /_ts (TestAnItemWriteReachesTheLogOnce counts 7 operations), never
// its RID, change or creation-order entries.
func replaced(k []byte) bool {
	switch k[0] {
	case 'D', 'F':
		return true
	case 'I':
		path := string(k[1+8+1 : 1+8+1+int(k[1+8])])
		return path == "/n" || path == "/_ts"
	}
	return false
}

// benchItemWrite writes items items over and over (new ones when items
// is 0); with replace, a rewrite sets and deletes only the keys an engine
// replace does (see replaced), else every key of the item.
func benchItemWrite(b *testing.B, items uint64, replace bool) {
	ctx := b.Context()
	value := make([]byte, 600)
	for i := range value {
		value[i] = byte('a' + i%23)
	}
	opts := Options{}
	layout := layoutToday
	if name := os.Getenv("ORRERY_BENCH_PEBBLE_LAYOUT"); name != "" {
		var ok bool
		if layout, ok = itemLayouts[name]; !ok {
			b.Fatalf("ORRERY_BENCH_PEBBLE_LAYOUT: no layout named %q", name)
		}
	}
	if name := os.Getenv("ORRERY_BENCH_PEBBLE_TUNE"); name != "" {
		tune, ok := itemWriteTunes[name]
		if !ok {
			b.Fatalf("ORRERY_BENCH_PEBBLE_TUNE: no settings named %q", name)
		}
		tune(&opts)
	}
	// With ORRERY_BENCH_PEBBLE_COMPARES set, Pebble's key comparisons are
	// counted (memtable insertions, reads, flushes and compactions alike;
	// the count costs CPU of its own).
	sortOps := os.Getenv("ORRERY_BENCH_PEBBLE_ORDER") == "sorted"
	var compares atomic.Int64
	if os.Getenv("ORRERY_BENCH_PEBBLE_COMPARES") != "" {
		tune := opts.tune
		opts.tune = func(p *pebbledb.Options) {
			if tune != nil {
				tune(p)
			}
			c := *pebbledb.DefaultComparer
			c.Compare = func(a, b []byte) int { compares.Add(1); return bytes.Compare(a, b) }
			p.Comparer = &c
		}
	}
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var next atomic.Uint64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	m0 := s.db.Metrics()
	syncs0, wal0, cpu0, cmp0 := walSyncs(m0), m0.WAL.BytesWritten, processCPU(b), compares.Load()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var ks, old [][]byte
		var ops []benchOp
		for pb.Next() {
			n := next.Add(1)
			bt := s.NewBatch()
			ks = ks[:0]
			if items > 0 {
				ks = itemKeysOf(ks, n%items, n, layout)
			} else {
				ks = itemKeysOf(ks, n, n, layout)
			}
			// The engine reads the item's record before it writes, so
			// its batch is never indexed.
			_, err := bt.Get(ctx, ks[0])
			if errors.Is(err, storage.ErrNotFound) {
				err = nil
			}
			ops, old = itemOps(ops[:0], old, ks, n, items, replace, layout, value)
			if sortOps {
				slices.SortStableFunc(ops, func(a, b benchOp) int { return bytes.Compare(a.key, b.key) })
			}
			for _, o := range ops {
				if err != nil {
					break
				}
				if o.del {
					err = bt.Delete(o.key)
				} else {
					err = bt.Set(o.key, o.value)
				}
			}
			var wait func() error
			if err == nil {
				wait, err = bt.CommitPipelined(ctx)
			}
			if err == nil {
				err = wait()
			}
			bt.Close()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	m := s.db.Metrics()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(walSyncs(m)-syncs0)/float64(b.N), "syncs/op")
	if n := compares.Load() - cmp0; n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "compares/op")
	}
	b.ReportMetric(float64(m.WAL.BytesWritten-wal0)/float64(b.N), "wal-B/op")
	var flushed, compRead, compWritten uint64
	for i := range m.Levels {
		l, l0 := &m.Levels[i], &m0.Levels[i]
		flushed += l.TableBytesFlushed - l0.TableBytesFlushed
		compRead += l.TableBytesRead - l0.TableBytesRead
		compWritten += l.TableBytesCompacted - l0.TableBytesCompacted
	}
	b.ReportMetric(float64(flushed)/float64(b.N), "flushed-B/op")
	b.ReportMetric(float64(compRead)/float64(b.N), "compact-read-B/op")
	b.ReportMetric(float64(compWritten)/float64(b.N), "compact-written-B/op")
	b.ReportMetric(float64(m.ReadAmp()), "read-amp")
	b.ReportMetric(float64(m.DiskSpaceUsage())/float64(b.N), "disk-B/op")
	// The share of the tables' bytes that are bloom filters (of the tables
	// in the store at the end: a compaction writes them in that share).
	if levels, err := s.db.SSTables(pebbledb.WithProperties()); err == nil {
		var filters, size uint64
		for _, l := range levels {
			for _, t := range l {
				filters += t.Properties.FilterSize
				size += t.Size
			}
		}
		b.ReportMetric(100*float64(filters)/float64(max(size, 1)), "filter-%")
	}
	reportRate(b)
	// Point reads of items written, in the state the writes left (the
	// read amplification above): the CPU each costs the reading thread
	// (the process's would count compactions still under way).
	const reads = 20_000
	var ks [][]byte
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu1 := threadCPU(b)
	for i := range uint64(reads) {
		n := 1 + (i*7919)%min(next.Load(), max(items, next.Load()))
		if items > 0 {
			ks = itemKeysOf(ks[:0], n%items, n, layout)
		} else {
			ks = itemKeysOf(ks[:0], n, n, layout)
		}
		if _, err := s.Get(ctx, ks[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((threadCPU(b)-cpu1).Nanoseconds())/1e3/reads, "get-cpu-µs")
	if os.Getenv("ORRERY_BENCH_PEBBLE_METRICS") != "" {
		fmt.Fprintln(os.Stderr, m.String())
	}
}

// itemOps appends to ops the operations of write n of benchItemWrite,
// whose keys are ks: the deletes of the previous version's keys (built in
// old, returned for reuse), then the sets.
func itemOps(ops []benchOp, old, ks [][]byte, n, items uint64, replace bool, layout itemLayout, value []byte) ([]benchOp, [][]byte) {
	if items > 0 && n > items {
		// The item's previous version, write n-items: its feed and
		// index entries go.
		old = itemKeysOf(old[:0], n%items, n-items, layout)
		for _, k := range old {
			if (k[0] == 'F' || k[0] == 'I') && (!replace || replaced(k)) {
				ops = append(ops, benchOp{key: k, del: true})
			}
		}
	}
	rewrite := replace && items > 0 && n > items
	for _, k := range ks {
		if rewrite && !replaced(k) {
			continue
		}
		ops = append(ops, benchOp{key: k, value: itemValue(ks, k, value, layout)})
	}
	return ops, old
}

type benchOp struct {
	key, value []byte
	del        bool
}

// batchOf is a batch of s holding ops, not committed.
func batchOf(b *testing.B, s *Store, ops []benchOp) storage.Batch {
	bt := s.NewBatch()
	for _, o := range ops {
		var err error
		if o.del {
			err = bt.Delete(o.key)
		} else {
			err = bt.Set(o.key, o.value)
		}
		if err != nil {
			bt.Close()
			b.Fatal(err)
		}
	}
	return bt
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkItemApply counts the key comparisons of Pebble's memtable
// insertion of an item write's keys (the largest share of the store's CPU
// per write: see BenchmarkItemWrite), alone: one writer, a store in memory
// without sync and a memtable large enough never to flush, 4,000 writes
// before the timed ones, and the comparisons counted during commits only.
// "build" adds a write's operations in the order the engine builds them
// (BenchmarkItemWrite's), "sorted" in key order and "descending" in
// descending key order (stable sorts: a key set and deleted keeps its
// operations' order).
//
// Pebble inserts a batch's keys with one skiplist inserter, which keeps the
// splice (the nodes before and after) of the key it inserted last; the next
// key is inserted from that splice, without a search, only when it falls
// between the same two nodes at the lowest level, else it is searched from
// the top of the list (internal/arenaskl findSplice). The benchmark tells
// the two apart: splice-compares/key are the comparisons of that check,
// search-compares/key those of the searches, spliced-keys/op the keys
// inserted without a search, shared-prefix-B/compare the bytes a
// comparison finds equal before the first that differs; sort-compares/op
// are the sort's own (on keys in the processor's cache).
func BenchmarkItemApply(b *testing.B) {
	for _, kind := range []struct {
		name    string
		items   uint64
		replace bool
	}{{"create", 0, false}, {"overwrite", 2_000, false}, {"replace", 2_000, true}} {
		for _, order := range []int{0, 1, -1} {
			name := kind.name + map[int]string{0: "/build", 1: "/sorted", -1: "/descending"}[order]
			b.Run(name, func(b *testing.B) { benchItemApply(b, kind.items, kind.replace, order) })
		}
	}
}

// benchItemApply writes in the engine's order (order 0), in key order (1)
// or in descending key order (-1).
func benchItemApply(b *testing.B, items uint64, replace bool, order int) {
	ctx := b.Context()
	value := make([]byte, 600)
	// While counting, the comparer tells the key being inserted (it lies in
	// the batch's representation, repr) from the memtable's: the search
	// compares key to node (findSpliceForLevel), the splice's check node to
	// key (keyIsAfterNode).
	var counting bool
	var repr []byte
	var search, splice, hits, shared int64
	// cur is the key being inserted, searched whether it was searched for.
	var cur uintptr
	var searched bool
	next := func(k []byte) {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(k))); p != cur {
			if cur != 0 && !searched {
				hits++
			}
			cur, searched = p, false
		}
	}
	inRepr := func(k []byte) bool {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(repr)))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(k)))
		return p >= lo && p < lo+uintptr(len(repr))
	}
	opts := Options{InMemory: true, NoSync: true, MemTableSize: 256 << 20}
	opts.tune = func(p *pebbledb.Options) {
		c := *pebbledb.DefaultComparer
		c.Compare = func(x, y []byte) int {
			if counting {
				switch {
				case inRepr(x):
					next(x)
					search++
					searched = true
				case inRepr(y):
					next(y)
					splice++
				default:
					panic("a comparison during a commit of no key of the batch")
				}
				n := min(len(x), len(y))
				i := 0
				for i < n && x[i] == y[i] {
					i++
				}
				shared += int64(i)
			}
			return bytes.Compare(x, y)
		}
		p.Comparer = &c
	}
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var ks, old [][]byte
	var ops []benchOp
	var keys, sorts int64
	write := func(n uint64, count bool) {
		ks = ks[:0]
		if items > 0 {
			ks = itemKeysOf(ks, n%items, n, layoutToday)
		} else {
			ks = itemKeysOf(ks, n, n, layoutToday)
		}
		ops, old = itemOps(ops[:0], old, ks, n, items, replace, layoutToday, value)
		if order != 0 {
			slices.SortStableFunc(ops, func(x, y benchOp) int {
				if count {
					sorts++
				}
				return order * bytes.Compare(x.key, y.key)
			})
		}
		bt := batchOf(b, s, ops)
		defer bt.Close()
		repr, counting = bt.(*batch).b.Repr(), count
		err := bt.Commit(ctx)
		if counting {
			next(nil)
			cur = 0
		}
		counting = false
		if err != nil {
			b.Fatal(err)
		}
		if count {
			keys += int64(len(ops))
		}
	}
	const prefill = 4_000
	for n := range uint64(prefill) {
		write(n+1, false)
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		write(prefill+1+i, true)
	}
	b.StopTimer()
	if s.db.Metrics().Flush.Count > 0 {
		b.Fatal("the memtable was flushed: the count includes the flush's comparisons")
	}
	b.ReportMetric(float64(search+splice)/float64(b.N), "compares/op")
	b.ReportMetric(float64(search)/float64(keys), "search-compares/key")
	b.ReportMetric(float64(splice)/float64(keys), "splice-compares/key")
	b.ReportMetric(float64(hits)/float64(b.N), "spliced-keys/op")
	b.ReportMetric(float64(shared)/float64(search+splice), "shared-prefix-B/compare")
	b.ReportMetric(float64(sorts)/float64(b.N), "sort-compares/op")
	b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
}

// BenchmarkItemApplyCounted is for counting the instructions and cache
// misses of item writes under cachegrind (GODEBUG=cpu.rdtscp=off: Go's
// runtime reads the time stamp counter with an instruction valgrind does
// not know; GOGC=off keeps the collector's work out of the counts): one
// writer, in memory, without sync, Pebble's own comparer. Count the
// difference of two runs (-benchtime 2000x and 1000x) to leave out the
// setup.
//
// "memtable" overwrites 2,000 items (22 operations a write) in a memtable
// that never flushes, after 6,000 writes, in the engine's order or, with
// ORRERY_BENCH_PEBBLE_ORDER=sorted or descending, in key order or
// descending key order (a stable sort). "store" overwrites 10,000 items
// from an empty store with the store's memtable size or the settings
// ORRERY_BENCH_PEBBLE_TUNE names (see itemWriteTunes), its flushes and
// compactions included: compare whole runs of one length.
func BenchmarkItemApplyCounted(b *testing.B) {
	order := map[string]int{"": 0, "sorted": 1, "descending": -1}[os.Getenv("ORRERY_BENCH_PEBBLE_ORDER")]
	b.Run("memtable", func(b *testing.B) {
		benchItemApplyCounted(b, Options{InMemory: true, NoSync: true, MemTableSize: 256 << 20}, 2_000, 6_000, order, true)
	})
	b.Run("store", func(b *testing.B) {
		opts := Options{InMemory: true, NoSync: true}
		if name := os.Getenv("ORRERY_BENCH_PEBBLE_TUNE"); name != "" {
			tune, ok := itemWriteTunes[name]
			if !ok {
				b.Fatalf("ORRERY_BENCH_PEBBLE_TUNE: no settings named %q", name)
			}
			tune(&opts)
		}
		benchItemApplyCounted(b, opts, 10_000, 0, order, false)
	})
}

// benchItemApplyCounted writes prefill writes, then b.N timed ones, over
// items items in order (see benchItemApply); with noFlush, a flush fails
// it.
func benchItemApplyCounted(b *testing.B, opts Options, items uint64, prefill int, order int, noFlush bool) {
	ctx := b.Context()
	value := make([]byte, 600)
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var ks, old [][]byte
	var ops []benchOp
	write := func(n uint64) {
		ks = itemKeysOf(ks[:0], n%items, n, layoutToday)
		ops, old = itemOps(ops[:0], old, ks, n, items, false, layoutToday, value)
		if order != 0 {
			slices.SortStableFunc(ops, func(x, y benchOp) int { return order * bytes.Compare(x.key, y.key) })
		}
		bt := batchOf(b, s, ops)
		defer bt.Close()
		if err := bt.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for n := range uint64(prefill) {
		write(n + 1)
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		write(uint64(prefill) + 1 + i)
	}
	b.StopTimer()
	m := s.db.Metrics()
	if noFlush && m.Flush.Count > 0 {
		b.Fatal("the memtable was flushed")
	}
	b.ReportMetric(float64(m.Flush.Count), "flushes")
	b.ReportMetric(float64(m.Compact.Count), "compactions")
}
