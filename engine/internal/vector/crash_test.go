package vector

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
)

// The crash test runs the index as the engine will: its keyspace under a
// prefix of a Pebble store, each change in the same durable batch as the
// item it comes from (items under another prefix).
var (
	indexPrefix = []byte("x")
	itemPrefix  = []byte("i")
)

// prefixed adapts a storage reader and batch to the index's keyspace.
type prefixed struct {
	r storage.Reader
	b storage.Batch
}

func (p prefixed) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := p.r.Get(ctx, append(append([]byte{}, indexPrefix...), key...))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

func (p prefixed) Scan(ctx context.Context, lower, upper []byte, fn func(k, v []byte) error) error {
	lo := append(append([]byte{}, indexPrefix...), lower...)
	var hi []byte
	if upper != nil {
		hi = append(append([]byte{}, indexPrefix...), upper...)
	} else {
		hi = storage.PrefixEnd(indexPrefix)
	}
	it, err := p.r.NewIterator(ctx, lo, hi, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		if err := fn(it.Key()[len(indexPrefix):], it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

func (p prefixed) Set(k, v []byte) error {
	return p.b.Set(append(append([]byte{}, indexPrefix...), k...), v)
}

func (p prefixed) Delete(k []byte) error {
	return p.b.Delete(append(append([]byte{}, indexPrefix...), k...))
}

func encodeVec(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

const crashDim = 16

func crashConfig(kind Kind) Config {
	return Config{Kind: kind, Dimensions: crashDim, Metric: Euclidean, QuantizationByteSize: 8, MaxDegree: 16, SearchListSize: 32}
}

// TestMain runs the crash test's writer when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv("ORRERY_VECTOR_CRASH_WRITER"); dir != "" {
		kind, _ := strconv.Atoi(os.Getenv("ORRERY_VECTOR_CRASH_KIND"))
		crashWriter(dir, Kind(kind))
		return
	}
	os.Exit(m.Run())
}

// crashWriter writes, deletes and rewrites items and their vectors until it
// is killed, printing how many batches it committed.
func crashWriter(dir string, kind Kind) {
	TrainAt = 150
	ctx := context.Background()
	st, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		panic(err)
	}
	ix, err := Open(ctx, prefixed{r: st}, crashConfig(kind))
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for n := 1; ; n++ {
		b := st.NewBatch()
		var changes []Change
		for range 1 + rng.IntN(3) {
			key := []byte(fmt.Sprintf("item%03d", rng.IntN(400)))
			if rng.IntN(4) == 0 {
				changes = append(changes, Change{Key: key})
				_ = b.Delete(append(append([]byte{}, itemPrefix...), key...))
			} else {
				v := randVec(rng, crashDim)
				changes = append(changes, Change{Key: key, Vector: v})
				_ = b.Set(append(append([]byte{}, itemPrefix...), key...), encodeVec(v))
			}
		}
		p, err := ix.Prepare(prefixed{r: b, b: b}, changes...)
		if err != nil {
			panic(err)
		}
		if err := b.Commit(ctx); err != nil {
			p.Abort()
			panic(err)
		}
		p.Commit()
		fmt.Println(n)
	}
}

// kill -9 during a write load: after each kill the index opens, holds
// exactly the items committed (no vector lost, none of a rolled-back or
// deleted item), and answers as an index rebuilt from those items would
// (flat exactly; the approximate kinds with their recall), and the writer
// goes on from there.
func TestKilledWriterLeavesTheIndexAsItsItems(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a writer process and kills it")
	}
	for _, kind := range []Kind{Flat, QuantizedFlat, DiskANN} {
		t.Run(kind.String(), func(t *testing.T) {
			dir := t.TempDir()
			for round := range 3 {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "ORRERY_VECTOR_CRASH_WRITER="+dir, "ORRERY_VECTOR_CRASH_KIND="+strconv.Itoa(int(kind)))
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(out)
				want := 150 + rand.IntN(150)
				for n := 0; n < want && sc.Scan(); n++ {
				}
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
				checkAgainstItems(t, dir, kind, round)
			}
		})
	}
}

func checkAgainstItems(t *testing.T, dir string, kind Kind, round int) {
	t.Helper()
	defer func(n int) { TrainAt = n }(TrainAt)
	TrainAt = 150
	ctx := context.Background()
	st, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	items := map[string][]float32{}
	it, err := st.NewIterator(ctx, itemPrefix, storage.PrefixEnd(itemPrefix), false)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		items[string(it.Key()[len(itemPrefix):])] = decodeVec(it.Value())
	}
	it.Close()
	ix, err := Open(ctx, prefixed{r: st}, crashConfig(kind))
	if err != nil {
		t.Fatalf("round %d: the index does not open: %v", round, err)
	}
	if ix.Len() != len(items) {
		t.Fatalf("round %d: the index holds %d items, the store %d", round, ix.Len(), len(items))
	}
	rng := rand.New(rand.NewPCG(uint64(round), 9))
	total := 0.0
	for range 30 {
		q := randVec(rng, crashDim)
		got, err := ix.Search(ctx, q, SearchOptions{K: 10, Reader: prefixed{r: st}})
		if err != nil {
			t.Fatal(err)
		}
		want := exact(Euclidean, items, q, 10, nil)
		for i, g := range got {
			v, ok := items[string(g.Key)]
			if !ok {
				t.Fatalf("round %d: found %s, which the store does not hold", round, g.Key)
			}
			if s := Score(Euclidean, q, v); math.Abs(s-g.Score) > 1e-4 {
				t.Fatalf("round %d: %s scores %v, its stored vector %v", round, g.Key, g.Score, s)
			}
			// Flat is exact: its i-th result is a rebuild's, or one as
			// near the query (two items whose distances differ by less
			// than the index's float32 rounding may come in either order).
			if kind == Flat && string(g.Key) != want[i] {
				if ws := Score(Euclidean, q, items[want[i]]); math.Abs(ws-g.Score) > 1e-4 {
					t.Fatalf("round %d: flat result %d is %s (score %v), a rebuild's %s (score %v)", round, i, g.Key, g.Score, want[i], ws)
				}
			}
		}
		total += recall(got, want)
	}
	if r := total / 30; r < 0.9 {
		t.Fatalf("round %d: recall@10 %.3f after the crash", round, r)
	}
	t.Logf("round %d: %d items, recall@10 %.3f", round, len(items), total/30)
}
