package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/storage"
)

// Opener opens a fresh, empty store for one test. Run closes the store when
// the test ends, so the opener must not register its own Close.
type Opener func(t *testing.T) storage.Store

// Run runs the whole conformance suite against the backend that open creates,
// each case as a subtest with its own store.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		run  func(t *testing.T, open Opener)
	}{
		{"PointOperations", testPointOperations},
		{"GetReturnsCopy", testGetReturnsCopy},
		{"SetKeepsCopy", testSetKeepsCopy},
		{"BatchReadsOwnWrites", testBatchReadsOwnWrites},
		{"BatchIterationMerges", testBatchIterationMerges},
		{"BatchReadBeforeItsWritesThenAfter", testBatchReadBeforeItsWritesThenAfter},
		{"Bounds", testBounds},
		{"PrefixScan", testPrefixScan},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"IteratorSeesWholeBatchesAcrossPages", testIteratorSeesWholeBatchesAcrossPages},
		{"UncommittedBatchLeavesNothing", testUncommittedBatchLeavesNothing},
		{"BatchAfterCommit", testBatchAfterCommit},
		{"BatchCount", testBatchCount},
		{"ConcurrentCommits", testConcurrentCommits},
		{"ClosedStore", testClosedStore},
		{"PipelinedCommit", testPipelinedCommit},
		{"CancelledContextReadsAndWritesNothing", testCancelledContext},
		{"KeyInsertedAsNewThatExistsFailsTheWholeBatch", testInsertExisting},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open) })
	}
}

// openStore opens a store and closes it when the test ends.
func openStore(t *testing.T, open Opener) storage.Store {
	t.Helper()
	s := open(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			t.Errorf("closing store: %v", err)
		}
	})
	return s
}

// commit writes pairs (key, value, key, value, ...) in one batch; a value of
// "<del>" deletes the key instead.
func commit(t *testing.T, s storage.Store, pairs ...string) {
	ctx := t.Context()
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	write(t, b, pairs...)
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

const deleteMark = "<del>"

func write(t *testing.T, b storage.Batch, pairs ...string) {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("odd number of key/value strings: %q", pairs)
	}
	for i := 0; i < len(pairs); i += 2 {
		var err error
		if pairs[i+1] == deleteMark {
			err = b.Delete([]byte(pairs[i]))
		} else {
			err = b.Set([]byte(pairs[i]), []byte(pairs[i+1]))
		}
		if err != nil {
			t.Fatalf("writing %q: %v", pairs[i], err)
		}
	}
}

// get returns the value under key, or deleteMark when it is missing.
func get(t *testing.T, r storage.Reader, key string) string {
	ctx := t.Context()
	t.Helper()
	v, err := r.Get(ctx, []byte(key))
	if errors.Is(err, storage.ErrNotFound) {
		return deleteMark
	}
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v)
}

// scan returns "key=value" for every key in the range, in iteration order.
func scan(t *testing.T, r storage.Reader, lower, upper []byte, reverse bool) []string {
	ctx := t.Context()
	t.Helper()
	it, err := r.NewIterator(ctx, lower, upper, reverse)
	if err != nil {
		t.Fatalf("NewIterator(%q, %q, %v): %v", lower, upper, reverse, err)
	}
	var got []string
	for it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterator error: %v", err)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("closing iterator: %v", err)
	}
	return got
}

func bs(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

func testPointOperations(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	steps := []struct {
		name  string
		pairs []string
		want  map[string]string
	}{
		{"set", []string{"a", "1", "b", "2"}, map[string]string{"a": "1", "b": "2", "c": deleteMark}},
		{"overwrite", []string{"a", "10"}, map[string]string{"a": "10", "b": "2"}},
		{"delete", []string{"b", deleteMark}, map[string]string{"a": "10", "b": deleteMark}},
		{"delete missing key", []string{"zz", deleteMark}, map[string]string{"zz": deleteMark}},
		{"set after delete", []string{"b", "3"}, map[string]string{"b": "3"}},
		{"empty value", []string{"e", ""}, map[string]string{"e": ""}},
		{"binary key", []string{"\x00\xff", "bin"}, map[string]string{"\x00\xff": "bin", "\x00": deleteMark}},
		{"last write in batch wins", []string{"w", "1", "w", "2", "x", "1", "x", deleteMark}, map[string]string{"w": "2", "x": deleteMark}},
	}
	for _, st := range steps {
		commit(t, s, st.pairs...)
		for k, want := range st.want {
			if got := get(t, s, k); got != want {
				t.Errorf("after %s: Get(%q) = %q, want %q", st.name, k, got, want)
			}
		}
	}
	if _, err := s.Get(ctx, []byte("missing")); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get of a missing key: err = %v, want ErrNotFound", err)
	}
}

func testGetReturnsCopy(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "k", "value")
	readers := map[string]storage.Reader{"store": s}
	snap := snapshot(t, s)
	defer snap.Close()
	readers["snapshot"] = snap
	b := s.NewBatch()
	defer b.Close()
	write(t, b, "own", "value")
	readers["batch"] = b
	for name, r := range readers {
		for _, key := range []string{"k", "own"} {
			if name != "batch" && key == "own" {
				continue
			}
			v, err := r.Get(ctx, []byte(key))
			if err != nil {
				t.Fatalf("%s: Get(%q): %v", name, key, err)
			}
			for i := range v {
				v[i] = 'X'
			}
			if got := get(t, r, key); got != "value" {
				t.Errorf("%s: after changing the returned slice, Get(%q) = %q, want %q", name, key, got, "value")
			}
		}
	}
}

func testSetKeepsCopy(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	b := s.NewBatch()
	defer b.Close()
	key, value := []byte("key"), []byte("value")
	if err := b.Set(key, value); err != nil {
		t.Fatal(err)
	}
	key[0], value[0] = 'X', 'X'
	if got := get(t, b, "key"); got != "value" {
		t.Errorf("batch Get after changing the caller's slices = %q, want %q", got, "value")
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "key"); got != "value" {
		t.Errorf("store Get after changing the caller's slices = %q, want %q", got, "value")
	}
	if got := get(t, s, "Xey"); got != deleteMark {
		t.Errorf("the changed key %q was stored", "Xey")
	}
}

func testBatchReadsOwnWrites(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "a", "1", "b", "2", "c", "3")
	b := s.NewBatch()
	defer b.Close()
	write(t, b, "b", "20", "c", deleteMark, "d", "4")
	tests := []struct {
		key, batch, store string
	}{
		{"a", "1", "1"},
		{"b", "20", "2"},
		{"c", deleteMark, "3"},
		{"d", "4", deleteMark},
	}
	for _, tt := range tests {
		if got := get(t, b, tt.key); got != tt.batch {
			t.Errorf("batch Get(%q) = %q, want %q", tt.key, got, tt.batch)
		}
		if got := get(t, s, tt.key); got != tt.store {
			t.Errorf("store Get(%q) before commit = %q, want %q", tt.key, got, tt.store)
		}
	}
	// The batch reads the latest committed state under its own writes.
	commit(t, s, "a", "100", "e", "5")
	if got := get(t, b, "a"); got != "100" {
		t.Errorf("batch Get(%q) after another commit = %q, want %q", "a", got, "100")
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"a=100", "b=20", "d=4", "e=5"}
	if got := scan(t, s, nil, nil, false); !slices.Equal(got, want) {
		t.Errorf("store after commit = %q, want %q", got, want)
	}
}

// A batch read before it writes anything reads the store's latest state;
// once it writes, its reads and iterators see those writes, and its commit
// applies them all (a write reads its item first, then writes).
func testBatchReadBeforeItsWritesThenAfter(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "a", "1", "b", "2")
	b := s.NewBatch()
	defer b.Close()
	if got := get(t, b, "a"); got != "1" {
		t.Errorf("batch Get(a) before its writes = %q, want 1", got)
	}
	commit(t, s, "a", "10")
	if got := get(t, b, "a"); got != "10" {
		t.Errorf("batch Get(a) before its writes, after another commit = %q, want 10", got)
	}
	write(t, b, "a", "100", "c", "3")
	if got := get(t, b, "a"); got != "100" {
		t.Errorf("batch Get(a) after its write = %q, want 100", got)
	}
	write(t, b, "b", deleteMark, "d", "4")
	if got := get(t, b, "b"); got != deleteMark {
		t.Errorf("batch Get(b) after its delete = %q, want absent", got)
	}
	if got, want := scan(t, b, nil, nil, false), []string{"a=100", "c=3", "d=4"}; !slices.Equal(got, want) {
		t.Errorf("batch scan = %q, want %q", got, want)
	}
	write(t, b, "e", "5")
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := scan(t, s, nil, nil, false), []string{"a=100", "c=3", "d=4", "e=5"}; !slices.Equal(got, want) {
		t.Errorf("store after commit = %q, want %q", got, want)
	}
}

func testBatchIterationMerges(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "a", "1", "c", "3", "e", "5", "g", "7")
	b := s.NewBatch()
	defer b.Close()
	write(t, b,
		"0", "0", // before every base key
		"b", "2", // between base keys
		"c", "30", // overwrites a base key
		"e", deleteMark, // hides a base key
		"f", deleteMark, // deletes a key that does not exist
		"h", "8", // after every base key
	)
	tests := []struct {
		name         string
		lower, upper string
		want         []string
	}{
		{"whole range", "", "", []string{"0=0", "a=1", "b=2", "c=30", "g=7", "h=8"}},
		{"bounded", "b", "g", []string{"b=2", "c=30"}},
		{"lower on a deleted key", "e", "", []string{"g=7", "h=8"}},
		{"upper bound excludes overwritten key", "", "c", []string{"0=0", "a=1", "b=2"}},
		{"only deleted keys", "d", "f\xff", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scan(t, b, bs(tt.lower), bs(tt.upper), false); !slices.Equal(got, tt.want) {
				t.Errorf("forward = %q, want %q", got, tt.want)
			}
			if got := scan(t, b, bs(tt.lower), bs(tt.upper), true); !slices.Equal(got, reversed(tt.want)) {
				t.Errorf("reverse = %q, want %q", got, reversed(tt.want))
			}
		})
	}
	if got, want := scan(t, s, nil, nil, false), []string{"a=1", "c=3", "e=5", "g=7"}; !slices.Equal(got, want) {
		t.Errorf("store during the batch = %q, want %q", got, want)
	}
	// A batch's iterator sees the writes made before it was opened, not
	// those made while it is open.
	for _, reverse := range []bool{false, true} {
		it, err := b.NewIterator(ctx, nil, nil, reverse)
		if err != nil {
			t.Fatal(err)
		}
		write(t, b, "a", deleteMark, "b", "20", "d", "4", "i", "9")
		var got []string
		for it.Next() {
			got = append(got, string(it.Key())+"="+string(it.Value()))
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		want := []string{"0=0", "a=1", "b=2", "c=30", "g=7", "h=8"}
		if reverse {
			want = []string{"0=0", "b=20", "c=30", "d=4", "g=7", "h=8", "i=9"}
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("reverse=%v: an iterator with writes made while it was open = %q, want %q", reverse, got, want)
		}
	}
}

func testBounds(t *testing.T, open Opener) {
	s := openStore(t, open)
	commit(t, s, "a", "1", "b", "2", "ba", "3", "c", "4", "d", "5")
	all := []string{"a=1", "b=2", "ba=3", "c=4", "d=5"}
	tests := []struct {
		name         string
		lower, upper string
		want         []string
	}{
		{"unbounded", "", "", all},
		{"lower is inclusive", "b", "", all[1:]},
		{"upper is exclusive", "", "c", all[:3]},
		{"both", "b", "c", all[1:3]},
		{"bounds between keys", "aa", "bb", all[1:3]},
		{"empty range", "b", "b", nil},
		{"inverted range", "c", "a", nil},
		{"below every key", "", "a", nil},
		{"above every key", "e", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scan(t, s, bs(tt.lower), bs(tt.upper), false); !slices.Equal(got, tt.want) {
				t.Errorf("forward = %q, want %q", got, tt.want)
			}
			if got := scan(t, s, bs(tt.lower), bs(tt.upper), true); !slices.Equal(got, reversed(tt.want)) {
				t.Errorf("reverse = %q, want %q", got, reversed(tt.want))
			}
		})
	}
}

func testPrefixScan(t *testing.T, open Opener) {
	s := openStore(t, open)
	commit(t, s,
		"ab", "1", "ab\x00", "2", "ab\xff", "3", "ab\xff\xff", "4", "ac", "5",
		"\xff", "6", "\xff\xff", "7", "a", "8",
	)
	tests := []struct {
		prefix string
		want   []string
	}{
		{"ab", []string{"ab=1", "ab\x00=2", "ab\xff=3", "ab\xff\xff=4"}},
		{"ab\xff", []string{"ab\xff=3", "ab\xff\xff=4"}},
		{"\xff", []string{"\xff=6", "\xff\xff=7"}},
		{"b", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.prefix), func(t *testing.T) {
			lower := []byte(tt.prefix)
			upper := storage.PrefixEnd(lower)
			if got := scan(t, s, lower, upper, false); !slices.Equal(got, tt.want) {
				t.Errorf("forward = %q, want %q", got, tt.want)
			}
			if got := scan(t, s, lower, upper, true); !slices.Equal(got, reversed(tt.want)) {
				t.Errorf("reverse = %q, want %q", got, reversed(tt.want))
			}
		})
	}
}

func testSnapshotIsolation(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "a", "1", "b", "2")
	snap := snapshot(t, s)
	defer snap.Close()
	it, err := s.NewIterator(ctx, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, "a", "10", "b", deleteMark, "c", "3")
	before := []string{"a=1", "b=2"}
	after := []string{"a=10", "c=3"}
	if got := scan(t, snap, nil, nil, false); !slices.Equal(got, before) {
		t.Errorf("snapshot scan = %q, want %q", got, before)
	}
	if got := scan(t, snap, nil, nil, true); !slices.Equal(got, reversed(before)) {
		t.Errorf("snapshot reverse scan = %q, want %q", got, reversed(before))
	}
	for k, want := range map[string]string{"a": "1", "b": "2", "c": deleteMark} {
		if got := get(t, snap, k); got != want {
			t.Errorf("snapshot Get(%q) = %q, want %q", k, got, want)
		}
	}
	if got := scan(t, s, nil, nil, false); !slices.Equal(got, after) {
		t.Errorf("store scan = %q, want %q", got, after)
	}
	// An iterator opened before the commit is a consistent view too.
	var got []string
	for it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, before) {
		t.Errorf("iterator opened before the commit = %q, want %q", got, before)
	}
}

func testUncommittedBatchLeavesNothing(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "keep", "1")
	b := s.NewBatch()
	write(t, b, "keep", deleteMark, "new", "2")
	if err := b.Close(); err != nil {
		t.Fatalf("closing an uncommitted batch: %v", err)
	}
	if got, want := scan(t, s, nil, nil, false), []string{"keep=1"}; !slices.Equal(got, want) {
		t.Errorf("store after a discarded batch = %q, want %q", got, want)
	}
	tests := []struct {
		name string
		op   func() error
	}{
		{"Set", func() error { return b.Set([]byte("x"), []byte("y")) }},
		{"Delete", func() error { return b.Delete([]byte("x")) }},
		{"Get", func() error { _, err := b.Get(ctx, []byte("keep")); return err }},
		{"NewIterator", func() error { _, err := b.NewIterator(ctx, nil, nil, false); return err }},
		{"Commit", func() error { return b.Commit(ctx) }},
	}
	for _, tt := range tests {
		if err := tt.op(); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s on a closed batch: err = %v, want ErrClosed", tt.name, err)
		}
	}
	if got, want := scan(t, s, nil, nil, false), []string{"keep=1"}; !slices.Equal(got, want) {
		t.Errorf("store after using a closed batch = %q, want %q", got, want)
	}
}

func testBatchAfterCommit(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	b := s.NewBatch()
	defer b.Close()
	write(t, b, "a", "1")
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("second Commit: err = %v, want ErrClosed", err)
	}
	if err := b.Set([]byte("b"), []byte("2")); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Set after Commit: err = %v, want ErrClosed", err)
	}
	if got, want := scan(t, s, nil, nil, false), []string{"a=1"}; !slices.Equal(got, want) {
		t.Errorf("store = %q, want %q", got, want)
	}
}

func testBatchCount(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	b := s.NewBatch()
	defer b.Close()
	steps := []struct {
		pairs []string
		want  int
	}{
		{nil, 0},
		{[]string{"a", "1"}, 1},
		{[]string{"a", "2"}, 2},
		{[]string{"a", deleteMark, "missing", deleteMark}, 4},
	}
	for _, st := range steps {
		write(t, b, st.pairs...)
		if got := b.Count(); got != st.want {
			t.Errorf("Count after %q = %d, want %d", st.pairs, got, st.want)
		}
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	empty := s.NewBatch()
	defer empty.Close()
	if err := empty.Commit(ctx); err != nil {
		t.Errorf("committing an empty batch: %v", err)
	}
}

// testConcurrentCommits commits from many goroutines at once while readers
// check, through snapshots, that every batch is seen whole or not at all.
// pagedKeys is enough keys to span several pages of a backend that reads
// a range a page at a time (PostgreSQL reads 256 rows per round trip).
const pagedKeys = 1000

// rewriteAll commits, in one batch, value gen under every one of pagedKeys
// keys: keys on both sides of every page boundary change at once.
func rewriteAll(ctx context.Context, s storage.Store, gen int) error {
	b := s.NewBatch()
	defer b.Close()
	v := []byte(fmt.Sprint(gen))
	for i := range pagedKeys {
		if err := b.Set(fmt.Appendf(nil, "k%04d", i), v); err != nil {
			return err
		}
	}
	return b.Commit(ctx)
}

// wholeGeneration reads the range of pagedKeys through it, calling between
// (if not nil) after the first key, and reports an error unless it saw
// every key once, in order, all holding the same value: one batch of
// rewriteAll, whole.
func wholeGeneration(it storage.Iterator, reverse bool, between func() error) (string, error) {
	defer it.Close()
	var gen string
	n := 0
	for it.Next() {
		want := n
		if reverse {
			want = pagedKeys - 1 - n
		}
		if k := fmt.Sprintf("k%04d", want); string(it.Key()) != k {
			return "", fmt.Errorf("key %d is %q, want %q", n, it.Key(), k)
		}
		if n == 0 {
			gen = string(it.Value())
			if between != nil {
				if err := between(); err != nil {
					return "", err
				}
			}
		} else if string(it.Value()) != gen {
			return "", fmt.Errorf("the iterator saw part of a batch: key %q holds %q, the first key held %q", it.Key(), it.Value(), gen)
		}
		n++
	}
	if err := it.Err(); err != nil {
		return "", err
	}
	if n != pagedKeys {
		return "", fmt.Errorf("the iterator saw %d keys, want %d", n, pagedKeys)
	}
	return gen, it.Close()
}

// An iterator of the store (or of a batch, over the store) is a
// point-in-time view however many pages it spans: a batch that rewrites
// keys on both sides of page boundaries while the iterator walks them is
// seen whole or not at all.
func testIteratorSeesWholeBatchesAcrossPages(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	if err := rewriteAll(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	gen := 0
	readers := map[string]func() (storage.Reader, func()){
		"store": func() (storage.Reader, func()) { return s, func() {} },
		"batch": func() (storage.Reader, func()) {
			b := s.NewBatch()
			return b, func() { b.Close() }
		},
	}
	for name, reader := range readers {
		for _, reverse := range []bool{false, true} {
			// A commit after the iterator has read its first key.
			r, done := reader()
			it, err := r.NewIterator(ctx, nil, nil, reverse)
			if err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprint(gen)
			got, err := wholeGeneration(it, reverse, func() error { gen++; return rewriteAll(ctx, s, gen) })
			done()
			if err != nil {
				t.Fatalf("%s, reverse=%v, commit after the first key: %v", name, reverse, err)
			}
			if got != before {
				t.Errorf("%s, reverse=%v: the iterator saw generation %s, committed after its first key; want %s", name, reverse, got, before)
			}
		}
	}
	// Commits racing with whole scans.
	stop := make(chan struct{})
	writerErr := make(chan error, 1)
	go func() {
		for g := gen + 1; ; g++ {
			select {
			case <-stop:
				writerErr <- nil
				return
			default:
			}
			if err := rewriteAll(ctx, s, g); err != nil {
				writerErr <- err
				return
			}
		}
	}()
	for i := range 20 {
		reverse := i%2 == 1
		it, err := s.NewIterator(ctx, nil, nil, reverse)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wholeGeneration(it, reverse, nil); err != nil {
			t.Errorf("scan %d, reverse=%v, under concurrent commits: %v", i, reverse, err)
			break
		}
	}
	close(stop)
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
}

func testConcurrentCommits(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	const writers, perWriter = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter+4)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				b := s.NewBatch()
				id := fmt.Sprintf("%02d-%03d", w, i)
				for _, part := range []string{"x/", "y/", "z/"} {
					if err := b.Set([]byte(part+id), []byte(id)); err != nil {
						errs <- err
					}
				}
				if err := b.Commit(ctx); err != nil {
					errs <- fmt.Errorf("commit %s: %w", id, err)
				}
				if err := b.Close(); err != nil {
					errs <- err
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				snap, err := s.NewSnapshot(ctx)
				if err == nil {
					err = checkWhole(ctx, snap)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	snap := snapshot(t, s)
	if err := checkWhole(ctx, snap); err != nil {
		t.Error(err)
	}
	snap = snapshot(t, s)
	defer snap.Close()
	for _, part := range []string{"x/", "y/", "z/"} {
		lower := []byte(part)
		if got := len(scan(t, snap, lower, storage.PrefixEnd(lower), false)); got != writers*perWriter {
			t.Errorf("%d keys under %q, want %d", got, part, writers*perWriter)
		}
	}
}

// checkWhole reports a batch of testConcurrentCommits that the snapshot sees
// only in part, and closes the snapshot.
// snapshot takes a snapshot of s, failing the test if it cannot.
func snapshot(t *testing.T, s storage.Store) storage.Snapshot {
	t.Helper()
	snap, err := s.NewSnapshot(t.Context())
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return snap
}

func checkWhole(ctx context.Context, snap storage.Snapshot) error {
	defer snap.Close()
	var sets [3][]string
	for i, part := range []string{"x/", "y/", "z/"} {
		lower := []byte(part)
		it, err := snap.NewIterator(ctx, lower, storage.PrefixEnd(lower), false)
		if err != nil {
			return err
		}
		for it.Next() {
			sets[i] = append(sets[i], strings.TrimPrefix(string(it.Key()), part))
			if !bytes.Equal(it.Key()[len(part):], it.Value()) {
				it.Close()
				return fmt.Errorf("key %q holds %q", it.Key(), it.Value())
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	if !slices.Equal(sets[0], sets[1]) || !slices.Equal(sets[0], sets[2]) {
		return fmt.Errorf("a snapshot sees part of a batch: %d, %d and %d keys", len(sets[0]), len(sets[1]), len(sets[2]))
	}
	return nil
}

func testClosedStore(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	commit(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	tests := []struct {
		name string
		op   func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, []byte("a")); return err }},
		{"NewIterator", func() error { _, err := s.NewIterator(ctx, nil, nil, false); return err }},
		{"batch Get", func() error { _, err := s.NewBatch().Get(ctx, []byte("a")); return err }},
		{"batch Commit", func() error {
			b := s.NewBatch()
			if err := b.Set([]byte("b"), []byte("2")); err != nil && !errors.Is(err, storage.ErrClosed) {
				return err
			}
			return b.Commit(ctx)
		}},
		{"NewSnapshot", func() error { _, err := s.NewSnapshot(ctx); return err }},
		{"second Close", s.Close},
	}
	for _, tt := range tests {
		if err := tt.op(); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s on a closed store: err = %v, want ErrClosed", tt.name, err)
		}
	}
}

// testPipelinedCommit checks that a pipelined commit is visible at once, that
// a batch built on it sees it, and that both are there once waited for.
func testPipelinedCommit(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	b1 := s.NewBatch()
	if err := b1.Set([]byte("k1"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	wait1, err := b1.CommitPipelined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b2 := s.NewBatch()
	got, err := b2.Get(ctx, []byte("k1"))
	if err != nil || string(got) != "v1" {
		t.Fatalf("a batch after a pipelined commit reads %q, %v; want v1", got, err)
	}
	if err := b2.Set([]byte("k2"), append(got, '+')); err != nil {
		t.Fatal(err)
	}
	wait2, err := b2.CommitPipelined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
	if err := wait1(); err != nil {
		t.Fatal(err)
	}
	b1.Close()
	b2.Close()
	for k, want := range map[string]string{"k1": "v1", "k2": "v1+"} {
		if got, err := s.Get(ctx, []byte(k)); err != nil || string(got) != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", k, got, err, want)
		}
	}
	if _, err := b1.CommitPipelined(ctx); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("pipelined commit of a committed batch: %v, want ErrClosed", err)
	}
}

// wantCanceled fails the test unless err, what the call name returned for
// a cancelled context, wraps context.Canceled.
func wantCanceled(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%s with a cancelled context: err = %v, want one wrapping context.Canceled", name, err)
	}
}

// closed closes what a call that should have failed opened anyway, and
// returns the call's error.
func closed[T interface{ Close() error }](v T, err error) error {
	if err == nil {
		v.Close()
	}
	return err
}

// A call made with a context that is already done fails with an error
// wrapping the context's, and a commit made with one writes nothing: the
// store, a batch and a snapshot alike.
func testCancelledContext(t *testing.T, open Opener) {
	s := openStore(t, open)
	commit(t, s, "a", "1")
	live := t.Context()
	snap := snapshot(t, s)
	defer snap.Close()
	ctx, cancel := context.WithCancel(live)
	cancel()
	want := func(name string, err error) { t.Helper(); wantCanceled(t, name, err) }
	_, err := s.Get(ctx, []byte("a"))
	want("Get", err)
	want("NewIterator", closed(s.NewIterator(ctx, nil, nil, false)))
	want("NewSnapshot", closed(s.NewSnapshot(ctx)))
	_, err = snap.Get(ctx, []byte("a"))
	want("snapshot Get", err)
	want("snapshot NewIterator", closed(snap.NewIterator(ctx, nil, nil, false)))

	b := s.NewBatch()
	if err := b.Set([]byte("b"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	_, err = b.Get(ctx, []byte("a"))
	want("batch Get", err)
	want("batch NewIterator", closed(b.NewIterator(ctx, nil, nil, false)))
	want("Commit", b.Commit(ctx))
	b.Close()

	b = s.NewBatch()
	if err := b.Set([]byte("c"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	wait, err := b.CommitPipelined(ctx)
	if err == nil {
		wait()
	}
	want("CommitPipelined", err)
	b.Close()

	if got, want := scan(t, s, nil, nil, false), []string{"a=1"}; !slices.Equal(got, want) {
		t.Errorf("store after commits with a cancelled context = %q, want %q", got, want)
	}
}

// testInsertExisting holds storage.Insert to its meaning: a key written as
// new commits like Set when it is absent; on a store whose batches check
// it (storage.Inserter), one that exists fails the commit with ErrExists
// and none of the batch is applied, the key keeping its value; a key the
// batch wrote before is not declared new (Insert is Set), a Set after
// Insert keeps the declaration and a Delete drops it.
func testInsertExisting(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	commit(t, s, "a", "1", "g", "7")
	b := s.NewBatch()
	defer b.Close()
	insert := func(b storage.Batch, key, value string) {
		t.Helper()
		if err := storage.Insert(b, []byte(key), []byte(value)); err != nil {
			t.Fatalf("Insert(%q): %v", key, err)
		}
	}
	// Absent keys: committed, read back, a Set after Insert kept.
	insert(b, "d", "4")
	write(t, b, "d", "5")
	insert(b, "e", "6")
	if got := get(t, b, "d"); got != "5" {
		t.Fatalf("the batch reads its inserted key d as %q, want 5", got)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("Commit of keys inserted as new, absent: %v", err)
	}
	if d, e := get(t, s, "d"), get(t, s, "e"); d != "5" || e != "6" {
		t.Fatalf("after the commit d=%q e=%q, want 5 and 6", d, e)
	}
	// A key the batch wrote first (Set or Delete) is written as by Set.
	b = s.NewBatch()
	defer b.Close()
	write(t, b, "d", "8")
	insert(b, "d", "9")
	write(t, b, "a", deleteMark)
	insert(b, "a", "2")
	insert(b, "g", "8") // declared, then the declaration dropped
	write(t, b, "g", deleteMark)
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("Commit of Insert after the batch's own write: %v", err)
	}
	if a, d, g := get(t, s, "a"), get(t, s, "d"), get(t, s, "g"); a != "2" || d != "9" || g != deleteMark {
		t.Fatalf("after Insert of keys the batch wrote before: a=%q d=%q g=%q, want 2, 9, deleted", a, d, g)
	}
	if _, checks := s.NewBatch().(storage.Inserter); !checks {
		return // a store that does not check: Insert is Set
	}
	// An existing key declared new: nothing of the batch applied.
	b = s.NewBatch()
	defer b.Close()
	write(t, b, "b", "2", "e", deleteMark)
	insert(b, "a", "x")
	insert(b, "c", "3")
	insert(b, "d", "y")
	write(t, b, "d", "z") // still declared new
	err := b.Commit(ctx)
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("Commit of keys inserted as new, two existing: %v, want ErrExists", err)
	}
	for key, want := range map[string]string{"a": "2", "b": deleteMark, "c": deleteMark, "d": "9", "e": "6"} {
		if got := get(t, s, key); got != want {
			t.Errorf("after the failed commit %s=%q, want %q: a part of the batch was applied", key, got, want)
		}
	}
}
