package vector

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks below run on a generated data set (bench/README.md gives
// the recipe): ORRERY_VECTOR_BENCH_N vectors (100,000 by default) of 768
// dimensions around 200 centres, unit length, and 1,000 queries drawn the
// same way, with their exact top 100 by cosine similarity and, for the
// filtered benchmark, the exact top 100 of the one item in ten whose id ends
// in 3. The files are written once to ORRERY_VECTOR_BENCH_DIR (the temporary
// directory by default) in the fvecs/ivecs format, where bench/compare.py
// reads them to measure hnswlib and FAISS on the same data.

const (
	benchNoise   = 2.0
	benchLatent  = 48
	benchDim     = 768
	benchQueries = 1000
	benchCentres = 200
	benchGT      = 100
)

type benchData struct {
	base, queries [][]float32
	gt, gtFilter  [][]int32
}

var (
	benchOnce sync.Once
	benchSet  *benchData
	benchErr  error
)

func benchN() int {
	if s := os.Getenv("ORRERY_VECTOR_BENCH_N"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 100_000
}

func benchDir() string {
	if d := os.Getenv("ORRERY_VECTOR_BENCH_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "orrery-vector-bench")
}

// admitted is the filtered benchmark's predicate: one item in ten.
func admitted(i int) bool { return i%10 == 3 }

func loadBench(b *testing.B) *benchData {
	benchOnce.Do(func() { benchSet, benchErr = makeBench(b) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSet
}

// makeBench reads the data set from the bench directory, or generates it
// there: the recipe is deterministic (seeded), so every run measures the
// same vectors.
func makeBench(b *testing.B) (*benchData, error) {
	n := benchN()
	dir := filepath.Join(benchDir(), fmt.Sprintf("n%d-latent%d-noise%g", n, benchLatent, benchNoise))
	d := &benchData{}
	var err error
	if d.base, err = readVecs(filepath.Join(dir, "base.fvecs")); err == nil {
		if d.queries, err = readVecs(filepath.Join(dir, "query.fvecs")); err == nil {
			if d.gt, err = readIVecs(filepath.Join(dir, "gt.ivecs")); err == nil {
				if d.gtFilter, err = readIVecs(filepath.Join(dir, "gt_filter.ivecs")); err == nil && len(d.base) == n {
					return d, nil
				}
			}
		}
	}
	b.Logf("generating %d × %d vectors and their exact neighbours in %s", n, benchDim, dir)
	rng := rand.New(rand.NewPCG(2024, 27))
	// Embeddings have a low intrinsic dimension: points are drawn in a
	// latent space of benchLatent dimensions, around benchCentres centres,
	// mapped to benchDim dimensions by one fixed random matrix, with a
	// little isotropic noise on top, and scaled to unit length.
	proj := make([][]float32, benchDim)
	for i := range proj {
		proj[i] = randVec(rng, benchLatent)
	}
	centres := make([][]float32, benchCentres)
	for i := range centres {
		centres[i] = randVec(rng, benchLatent)
		for j := range centres[i] {
			centres[i][j] *= 2
		}
	}
	draw := func() []float32 {
		c := centres[rng.IntN(benchCentres)]
		y := make([]float32, benchLatent)
		for j := range y {
			y[j] = c[j] + float32(rng.NormFloat64())
		}
		v := make([]float32, benchDim)
		for i := range v {
			v[i] = dotGo(proj[i], y) + benchNoise*float32(rng.NormFloat64())
		}
		return normalized(v)
	}
	d.base = make([][]float32, n)
	for i := range d.base {
		d.base[i] = draw()
	}
	d.queries = make([][]float32, benchQueries)
	for i := range d.queries {
		d.queries[i] = draw()
	}
	d.gt = exactNeighbours(d.base, d.queries, nil)
	d.gtFilter = exactNeighbours(d.base, d.queries, admitted)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, w := range map[string]func(io.Writer) error{
		"base.fvecs":      func(w io.Writer) error { return writeVecs(w, d.base) },
		"query.fvecs":     func(w io.Writer) error { return writeVecs(w, d.queries) },
		"gt.ivecs":        func(w io.Writer) error { return writeIVecs(w, d.gt) },
		"gt_filter.ivecs": func(w io.Writer) error { return writeIVecs(w, d.gtFilter) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriter(f)
		if err := w(bw); err != nil {
			return nil, err
		}
		if err := bw.Flush(); err != nil {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// exactNeighbours is the brute-force top benchGT by dot product (the
// vectors are unit length: cosine), on two goroutines.
func exactNeighbours(base, queries [][]float32, admit func(int) bool) [][]int32 {
	out := make([][]int32, len(queries))
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for qi := w; qi < len(queries); qi += 2 {
				t := topK{k: benchGT}
				for i, v := range base {
					if admit != nil && !admit(i) {
						continue
					}
					d := -dot(queries[qi], v)
					if d < t.worst() {
						t.offer(candidate{d: d, id: uint32(i)})
					}
				}
				for _, c := range t.sorted() {
					out[qi] = append(out[qi], int32(c.id))
				}
			}
		}()
	}
	wg.Wait()
	return out
}

func writeVecs(w io.Writer, vs [][]float32) error {
	for _, v := range vs {
		buf := binary.LittleEndian.AppendUint32(nil, uint32(len(v)))
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

func writeIVecs(w io.Writer, vs [][]int32) error {
	for _, v := range vs {
		buf := binary.LittleEndian.AppendUint32(nil, uint32(len(v)))
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

func readRows(path string) ([][]uint32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]uint32
	for len(raw) >= 4 {
		n := int(binary.LittleEndian.Uint32(raw))
		if len(raw) < 4+4*n {
			return nil, fmt.Errorf("%s: short row", path)
		}
		row := make([]uint32, n)
		for i := range row {
			row[i] = binary.LittleEndian.Uint32(raw[4+4*i:])
		}
		out = append(out, row)
		raw = raw[4+4*n:]
	}
	return out, nil
}

func readVecs(path string) ([][]float32, error) {
	rows, err := readRows(path)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = make([]float32, len(r))
		for j, x := range r {
			out[i][j] = math.Float32frombits(x)
		}
	}
	return out, nil
}

func readIVecs(path string) ([][]int32, error) {
	rows, err := readRows(path)
	if err != nil {
		return nil, err
	}
	out := make([][]int32, len(rows))
	for i, r := range rows {
		out[i] = make([]int32, len(r))
		for j, x := range r {
			out[i][j] = int32(x)
		}
	}
	return out, nil
}

// builtIndex is an index of the whole data set, built once per kind.
type builtIndex struct {
	ix          *Index
	st          *MemStore
	build       time.Duration
	bytesPerVec float64
}

var (
	builtMu sync.Mutex
	built   = map[Kind]*builtIndex{}
)

func benchKey(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }

func buildBench(b *testing.B, d *benchData, kind Kind) *builtIndex {
	builtMu.Lock()
	defer builtMu.Unlock()
	if bi := built[kind]; bi != nil {
		return bi
	}
	ctx := context.Background()
	cfg := Config{Kind: kind, Dimensions: benchDim, Metric: Cosine}
	if r, err := strconv.Atoi(os.Getenv("ORRERY_VECTOR_BENCH_R")); err == nil {
		cfg.MaxDegree = r
	}
	// A keyspace built by an earlier run is opened instead of built again:
	// its build time is the one that run measured.
	snap := filepath.Join(benchDir(), fmt.Sprintf("n%d-latent%d-noise%g", len(d.base), benchLatent, benchNoise),
		fmt.Sprintf("%v-R%d.keyspace", kind, cfg.withDefaults().MaxDegree))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	st := NewMemStore()
	var ix *Index
	var build time.Duration
	if secs, err := loadKeyspace(snap, st); err == nil {
		start := time.Now()
		if ix, err = Open(ctx, st, cfg); err != nil {
			b.Fatal(err)
		}
		build = time.Duration(secs * float64(time.Second))
		b.Logf("%v: opened the keyspace of an earlier build in %v", kind, time.Since(start).Round(time.Millisecond))
	} else {
		var err error
		if ix, err = Open(ctx, st, cfg); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i, v := range d.base {
			var batch Batch
			p, err := ix.Prepare(&batch, Change{Key: benchKey(i), Vector: v})
			if err != nil {
				b.Fatal(err)
			}
			if err := batch.Apply(st); err != nil {
				b.Fatal(err)
			}
			p.Commit()
		}
		build = time.Since(start)
		if err := saveKeyspace(snap, st, build.Seconds()); err != nil {
			b.Fatal(err)
		}
	}
	bi := &builtIndex{ix: ix, st: st, build: build}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The index's own memory: the heap grown minus the keyspace's copy.
	stBytes := 0
	_ = st.Scan(ctx, nil, nil, func(k, v []byte) error { stBytes += len(k) + len(v) + 64; return nil })
	bi.bytesPerVec = (float64(after.HeapAlloc) - float64(before.HeapAlloc) - float64(stBytes)) / float64(len(d.base))
	b.Logf("%v: built %d vectors in %v (%.0f vectors/s), %.0f bytes of memory per vector besides the keyspace (%.0f bytes per vector)",
		kind, len(d.base), bi.build.Round(time.Millisecond), float64(len(d.base))/bi.build.Seconds(), bi.bytesPerVec, float64(stBytes)/float64(len(d.base)))
	built[kind] = bi
	return bi
}

// saveKeyspace writes a store's keys and values, after the build time.
func saveKeyspace(path string, st *MemStore, secs float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%g\n", secs)
	err = st.Scan(context.Background(), nil, nil, func(k, v []byte) error {
		buf := binary.AppendUvarint(nil, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		_, err := w.Write(append(buf, v...))
		return err
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// loadKeyspace reads what saveKeyspace wrote into st.
func loadKeyspace(path string, st *MemStore) (float64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	nl := strings.IndexByte(string(raw), '\n')
	if nl < 0 {
		return 0, fmt.Errorf("%s: no header", path)
	}
	secs, err := strconv.ParseFloat(string(raw[:nl]), 64)
	if err != nil {
		return 0, err
	}
	r := reader{b: raw[nl+1:]}
	for len(r.b) > 0 && !r.err {
		k := r.bytes(int(r.uvarint()))
		v := r.bytes(int(r.uvarint()))
		if !r.err {
			_ = st.Set(k, v)
		}
	}
	if r.err {
		return 0, fmt.Errorf("%s: truncated", path)
	}
	return secs, nil
}

// runQueries times b.N single-threaded queries (cycling through the query
// set) and reports recall@10 over the whole query set and queries/s.
func runQueries(b *testing.B, d *benchData, bi *builtIndex, opt SearchOptions, gt [][]int32) {
	ctx := context.Background()
	opt.K = 10
	opt.Reader = bi.st
	total := 0.0
	for qi, q := range d.queries {
		res, err := bi.ix.Search(ctx, q, opt)
		if err != nil {
			b.Fatal(err)
		}
		want := map[int32]bool{}
		for _, id := range gt[qi][:10] {
			want[id] = true
		}
		for _, r := range res {
			if want[int32(binary.BigEndian.Uint32(r.Key))] {
				total++
			}
		}
	}
	rec := total / float64(10*len(d.queries))
	before := graphDistances.Load()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := bi.ix.Search(ctx, d.queries[i%len(d.queries)], opt); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	if n := graphDistances.Load() - before; n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "distances/query")
	}
	b.ReportMetric(rec, "recall@10")
	b.ReportMetric(float64(b.N)/el.Seconds(), "queries/s")
	b.ReportMetric(bi.build.Seconds(), "build-s")
	b.ReportMetric(bi.bytesPerVec, "mem-B/vector")
}

// BenchmarkDiskANN measures the graph index at several beam widths
// (ListSize = K × searchListSizeMultiplier).
func BenchmarkDiskANN(b *testing.B) {
	d := loadBench(b)
	bi := buildBench(b, d, DiskANN)
	for _, L := range []int{10, 20, 40, 100} {
		b.Run(fmt.Sprintf("L=%d", L), func(b *testing.B) {
			runQueries(b, d, bi, SearchOptions{ListSize: L}, d.gt)
		})
	}
}

// BenchmarkDiskANNFiltered measures a search that admits one item in ten.
func BenchmarkDiskANNFiltered(b *testing.B) {
	d := loadBench(b)
	bi := buildBench(b, d, DiskANN)
	filter := func(k []byte) bool { return admitted(int(binary.BigEndian.Uint32(k))) }
	for _, L := range []int{40, 100} {
		b.Run(fmt.Sprintf("L=%d", L), func(b *testing.B) {
			runQueries(b, d, bi, SearchOptions{ListSize: L, Filter: filter}, d.gtFilter)
		})
	}
}

// BenchmarkFlat measures the exact scan.
func BenchmarkFlat(b *testing.B) {
	d := loadBench(b)
	bi := buildBench(b, d, Flat)
	runQueries(b, d, bi, SearchOptions{}, d.gt)
}

// BenchmarkQuantizedFlat measures the code scan with exact re-ranking of
// several candidate pool sizes.
func BenchmarkQuantizedFlat(b *testing.B) {
	d := loadBench(b)
	bi := buildBench(b, d, QuantizedFlat)
	for _, n := range []int{50, 100, 200, 400} {
		b.Run(fmt.Sprintf("rerank=%d", n), func(b *testing.B) {
			runQueries(b, d, bi, SearchOptions{Rerank: n}, d.gt)
		})
	}
}
