package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// SharedOpener opens two handles on one fresh shared store, as two
// processes would, and returns sever, which makes a handle lose its
// connection (its duties) as a network fault would. RunShared closes the
// handles when the test ends.
type SharedOpener func(t *testing.T) (a, b storage.Shared, sever func(storage.Shared))

// RunShared runs the conformance suite of storage.Shared: what several
// processes on one store rely on, checked across two handles.
func RunShared(t *testing.T, open SharedOpener) {
	cases := []struct {
		name string
		run  func(t *testing.T, a, b storage.Shared, sever func(storage.Shared))
	}{
		{"SharedBatchSeesOtherHandlesCommits", testSharedBatchReads},
		{"LocksExcludeAcrossHandles", testLocksExclude},
		{"SharedLocksHoldTogether", testSharedLocks},
		{"LockWaitersServedInArrivalOrder", testLockFIFO},
		{"LockWaitEndsWithContext", testLockContext},
		{"SequenceFollowsLockOrder", testSequenceOrder},
		{"WatermarkNeverPassesAnOpenBatch", testWatermark},
		{"GetAllReadsKeysAndTheWatermarkTogether", testGetAll},
		{"SnapshotAllCoversItsWatermark", testSnapshotAll},
		{"BeginReadsAfterItsLocksAndSequences", testBegin},
		{"CommitWatermarkPassesTheCommittedBatch", testCommitWatermark},
		{"CancelledContextTakesNoLock", testCancelledShared},
		{"LeadIsExclusiveAndLostWithTheConnection", testLead},
		{"SharedBatchInsertingAKeyAnotherHandleWroteFailsWhole", testSharedInsertExisting},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b, sever := open(t)
			t.Cleanup(func() {
				a.Close()
				b.Close()
			})
			c.run(t, a, b, sever)
		})
	}
}

// patience bounds every wait that must end: long, for a loaded machine.
const patience = 30 * time.Second

// settle is how long a test lets a goroutine reach a blocking call before
// it checks that the call is still blocked.
const settle = 300 * time.Millisecond

func newShared(t *testing.T, s storage.Shared) storage.SharedBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	b, err := s.NewSharedBatch(ctx)
	if err != nil {
		t.Fatalf("NewSharedBatch: %v", err)
	}
	return b
}

func lock(t *testing.T, b storage.SharedBatch, key string, exclusive bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := b.Lock(ctx, []byte(key), exclusive); err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
}

func testSharedBatchReads(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := t.Context()
	commit(t, a, "k", "1")
	sb := newShared(t, b)
	defer sb.Close()
	if got := get(t, sb, "k"); got != "1" {
		t.Fatalf("shared batch on B reads %q, want A's 1", got)
	}
	commit(t, a, "k", "2")
	if got := get(t, sb, "k"); got != "2" {
		t.Fatalf("shared batch reads %q after A's second commit, want 2 (read committed)", got)
	}
	write(t, sb, "k", "3", "n", "new")
	if got := get(t, sb, "k"); got != "3" {
		t.Fatalf("shared batch reads %q after its own write, want 3", got)
	}
	if got, want := scan(t, sb, nil, nil, false), []string{"k=3", "n=new"}; !slices.Equal(got, want) {
		t.Fatalf("shared batch scan = %q, want %q", got, want)
	}
	// Several keys at once (PostgreSQL's batch: one statement) read the
	// same: the batch's own writes and deletes over the latest commits.
	commit(t, a, "m", "committed")
	commit(t, a, "gone", "committed")
	if err := sb.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	many, err := storage.GetMany(ctx, sb, [][]byte{[]byte("k"), []byte("absent"), []byte("m"), []byte("gone"), []byte("k")})
	if err != nil || len(many) != 5 || string(many[0]) != "3" || many[1] != nil || string(many[2]) != "committed" || many[3] != nil || string(many[4]) != "3" {
		t.Fatalf("GetMany(k, absent, m, gone, k) in the batch = %q, %v; want [3 nil committed nil 3]", many, err)
	}
	if got := get(t, a, "k"); got != "2" {
		t.Fatalf("A reads %q before B commits, want 2", got)
	}
	if err := sb.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, a, "n"); got != "new" {
		t.Fatalf("A reads %q after B's commit, want new", got)
	}
}

// testLocksExclude holds an exclusive lock on A and checks that B's batch
// waits for it, through Commit and through Close.
func testLocksExclude(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := t.Context()
	for _, end := range []string{"Commit", "Close"} {
		t.Run(end, func(t *testing.T) {
			holder := newShared(t, a)
			lock(t, holder, "row", true)
			var got atomic.Bool
			done := make(chan error, 1)
			go func() {
				w := newShared(t, b)
				defer w.Close()
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				defer cancel()
				err := w.Lock(ctx, []byte("row"), true)
				got.Store(true)
				done <- err
			}()
			time.Sleep(settle)
			if got.Load() {
				t.Fatal("B took an exclusive lock that A holds")
			}
			if end == "Commit" {
				write(t, holder, "x", "1")
				if err := holder.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				holder.Close()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("B's Lock after A's %s: %v", end, err)
				}
			case <-time.After(patience):
				t.Fatalf("B still waits %v after A's %s", patience, end)
			}
		})
	}
}

// testSharedLocks: shared holders hold together; an exclusive request waits
// for them all.
func testSharedLocks(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	s1, s2 := newShared(t, a), newShared(t, b)
	lock(t, s1, "c", false)
	lock(t, s2, "c", false) // does not wait: it would time out
	var got atomic.Bool
	done := make(chan error, 1)
	go func() {
		x := newShared(t, a)
		defer x.Close()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		err := x.Lock(ctx, []byte("c"), true)
		got.Store(true)
		done <- err
	}()
	time.Sleep(settle)
	s1.Close()
	time.Sleep(settle)
	if got.Load() {
		t.Fatal("an exclusive lock was granted while a shared holder remained")
	}
	s2.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testLockFIFO queues two exclusive waiters, from both handles, behind a
// holder: they are served in the order they came.
func testLockFIFO(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := t.Context()
	holder := newShared(t, a)
	lock(t, holder, "q", true)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, s := range []storage.Shared{b, a, b} {
		name := fmt.Sprint("w", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newShared(t, s)
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := w.Lock(ctx, []byte("q"), true); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			w.Commit(ctx)
		}()
		time.Sleep(settle) // w_i waits before w_i+1 asks
	}
	holder.Commit(ctx)
	wg.Wait()
	if want := []string{"w0", "w1", "w2"}; !slices.Equal(order, want) {
		t.Fatalf("waiters served in order %q, want %q", order, want)
	}
}

// testLockContext: a waiter whose context ends stops waiting with the
// context's error, and does not keep the lock from later waiters.
func testLockContext(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	holder := newShared(t, a)
	lock(t, holder, "t", true)
	w := newShared(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	err := w.Lock(ctx, []byte("t"), true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v, want DeadlineExceeded", err)
	}
	w.Close()
	holder.Commit(ctx)
	next := newShared(t, b)
	defer next.Close()
	lock(t, next, "t", true)
}

// testSequenceOrder: writers from both handles increment one counter under
// its lock; in counter order their sequence numbers strictly rise.
func testSequenceOrder(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	const writers, each = 6, 10
	seqs := make([]uint64, writers*each+1)
	var wg sync.WaitGroup
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := increment(s, seqs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := get(t, a, "counter"); got != fmt.Sprint(writers*each) {
		t.Fatalf("counter = %s, want %d", got, writers*each)
	}
	for i := 2; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("increment %d has sequence %d, not above increment %d's %d", i, seqs[i], i-1, seqs[i-1])
		}
	}
}

func increment(s storage.Shared, seqs []uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	b, err := s.NewSharedBatch(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Lock(ctx, []byte("counter"), true); err != nil {
		return err
	}
	n := 0
	v, err := b.Get(ctx, []byte("counter"))
	if err == nil {
		fmt.Sscan(string(v), &n)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	seq, err := b.Sequence(ctx)
	if err != nil {
		return err
	}
	if again, err := b.Sequence(ctx); err != nil || again != seq {
		return fmt.Errorf("second Sequence = %d, %v; want %d", again, err, seq)
	}
	n++
	seqs[n] = seq
	if err := b.Set([]byte("counter"), []byte(fmt.Sprint(n))); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// testWatermark: while a batch with a sequence number is open, neither
// handle's watermark passes it, however many batches after it commit; once
// it ends, the watermark passes it.
func testWatermark(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := context.Background()
	open := newShared(t, a)
	seq, err := open.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		later := newShared(t, b)
		ls, err := later.Sequence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ls <= seq {
			t.Fatalf("a later batch has sequence %d, not above %d", ls, seq)
		}
		write(t, later, fmt.Sprint("k", i), "v")
		if err := later.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range []storage.Shared{a, b} {
			w, err := s.Watermark(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if w > seq {
				t.Fatalf("watermark %d passed open batch %d", w, seq)
			}
		}
	}
	write(t, open, "open", "v")
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for {
		w, err := b.Watermark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w > seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watermark %d still not past %d, committed %v ago", w, seq, patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testGetAll: GetAll reads every key (nil for an absent one, empty for an
// empty value) as the other handle committed it, and a watermark that does
// not pass an open batch.
func testGetAll(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := context.Background()
	commit(t, a, "x", "1", "empty", "")
	open := newShared(t, a)
	defer open.Close()
	seq, err := open.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, open, "x", "uncommitted")
	values, w, err := b.GetAll(ctx, [][]byte{[]byte("absent"), []byte("x"), []byte("empty")})
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 3 || values[0] != nil || string(values[1]) != "1" || values[2] == nil || len(values[2]) != 0 {
		t.Fatalf("GetAll(absent, x, empty) = %q, want [nil 1 \"\"]", values)
	}
	if w > seq {
		t.Fatalf("GetAll's watermark %d passed open batch %d", w, seq)
	}
	if w == 0 {
		t.Fatal("GetAll returned no watermark")
	}
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	values, _, err = b.GetAll(ctx, [][]byte{[]byte("x")})
	if err != nil || string(values[0]) != "uncommitted" {
		t.Fatalf("GetAll after the commit = %q, %v; want the committed value", values, err)
	}
}

// testSnapshotAll: SnapshotAll reads keys in the snapshot it opens, with a
// watermark that does not pass an open batch; the snapshot does not see
// what commits after it, and every batch below its watermark is in it.
func testSnapshotAll(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := context.Background()
	commit(t, a, "x", "1")
	open := newShared(t, a)
	defer open.Close()
	seq, err := open.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, open, "x", "2")
	snap, values, w, err := b.SnapshotAll(ctx, [][]byte{[]byte("absent"), []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 2 || values[0] != nil || string(values[1]) != "1" {
		t.Fatalf("SnapshotAll(absent, x) = %q, want [nil 1]", values)
	}
	if w == 0 || w > seq {
		t.Fatalf("SnapshotAll's watermark %d: want one at most the open batch's %d", w, seq)
	}
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := snap.Get(ctx, []byte("x")); err != nil || string(v) != "1" {
		t.Fatalf("the snapshot's Get(x) after a later commit = %q, %v; want 1", v, err)
	}
	snap.Close()
	// Committed below the next watermark: in the next snapshot.
	snap, values, w, err = b.SnapshotAll(ctx, [][]byte{[]byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if w <= seq || string(values[0]) != "2" {
		t.Fatalf("SnapshotAll after the commit: x = %q, watermark %d; want 2 and above %d", values[0], w, seq)
	}
	many, err := storage.GetMany(ctx, snap, [][]byte{[]byte("x"), []byte("absent"), []byte("x")})
	if err != nil || len(many) != 3 || string(many[0]) != "2" || many[1] != nil || string(many[2]) != "2" {
		t.Fatalf("GetMany(x, absent, x) in the snapshot = %q, %v", many, err)
	}
}

// testBegin: Begin waits for a conflicting holder, then reads what it
// committed, with a sequence number above the holder's; a key the batch
// wrote reads as written.
func testBegin(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := t.Context()
	commit(t, a, "v", "old")
	holder := newShared(t, a)
	lock(t, holder, "L", true)
	held, err := holder.Sequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Bool
	type result struct {
		v   []byte
		err error
	}
	done := make(chan result, 1)
	w := newShared(t, b)
	defer w.Close()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		values, err := w.Begin(ctx, []storage.LockRequest{{Key: []byte("S")}, {Key: []byte("L"), Exclusive: true}},
			[][]byte{[]byte("v"), []byte("absent")}, true)
		var v []byte
		if err == nil {
			v = values[0]
			if values[1] != nil {
				err = fmt.Errorf("absent key read as %q", values[1])
			}
		}
		got.Store(true)
		done <- result{v, err}
	}()
	time.Sleep(settle)
	if got.Load() {
		t.Fatal("Begin returned while another batch held its lock")
	}
	write(t, holder, "v", "new")
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || string(r.v) != "new" {
			t.Fatalf("Begin after the holder's commit = %q, %v; want new", r.v, r.err)
		}
	case <-time.After(patience):
		t.Fatalf("Begin still waits %v after the holder committed", patience)
	}
	seq, err := w.Sequence(ctx)
	if err != nil || seq <= held {
		t.Fatalf("Sequence after Begin = %d, %v; want above the holder's %d", seq, err, held)
	}
	if values, err := w.Begin(ctx, nil, [][]byte{[]byte("absent")}, true); err != nil || values[0] != nil {
		t.Fatalf("Begin reading an absent key = %q, %v; want nil", values, err)
	}
	if again, err := w.Sequence(ctx); err != nil || again != seq {
		t.Fatalf("Sequence after a second Begin = %d, %v; want %d still", again, err, seq)
	}
	write(t, w, "mine", "m", "v", deleteMark)
	values, err := w.Begin(ctx, []storage.LockRequest{{Key: []byte("L"), Exclusive: true}}, [][]byte{[]byte("mine"), []byte("v")}, false)
	if err != nil || len(values) != 2 || string(values[0]) != "m" || values[1] != nil {
		t.Fatalf("Begin reading the batch's own write and delete = %q, %v; want [m nil]", values, err)
	}
	// Many keys at once (PostgreSQL: one statement for them), among them
	// the batch's own, committed ones, absent ones and one named twice.
	commit(t, a, "c1", "one", "c2", "two")
	keys := [][]byte{[]byte("c1"), []byte("mine"), []byte("absent"), []byte("c2"), []byte("v"), []byte("c1")}
	values, err = w.Begin(ctx, nil, keys, false)
	var read []string
	for _, v := range values {
		if v == nil {
			read = append(read, "absent")
		} else {
			read = append(read, string(v))
		}
	}
	if want := []string{"one", "m", "absent", "two", "absent", "one"}; err != nil || !slices.Equal(read, want) {
		t.Fatalf("Begin reading %q = %q, %v; want %q", keys, read, err, want)
	}
}

// testCommitWatermark: the watermark CommitWatermark returns passes the
// batch it committed when no other batch is open, and the writes are
// there.
func testCommitWatermark(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx := context.Background()
	sb := newShared(t, a)
	lock(t, sb, "cw", true)
	seq, err := sb.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, sb, "cw", "1")
	w, err := sb.CommitWatermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w <= seq {
		t.Fatalf("CommitWatermark = %d, not past the committed batch's %d", w, seq)
	}
	if got := get(t, b, "cw"); got != "1" {
		t.Fatalf("B reads %q after CommitWatermark, want 1", got)
	}
	// A batch that wrote nothing still gets a watermark.
	empty := newShared(t, b)
	if w2, err := empty.CommitWatermark(ctx); err != nil || w2 < w {
		t.Fatalf("CommitWatermark of an empty batch = %d, %v; want at least %d", w2, err, w)
	}
}

// testLead: one handle holds a duty at a time; release passes it on, and
// so does losing the connection, which closes lost.
func testLead(t *testing.T, a, b storage.Shared, sever func(storage.Shared)) {
	bg := context.Background()
	lostA, releaseA, err := a.Lead(bg, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Lead(bg, "other"); err != nil {
		t.Fatalf("a second duty: %v", err)
	}
	ctx, cancel := context.WithTimeout(bg, settle)
	_, _, err = b.Lead(ctx, "ttl")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's Lead while A holds the duty: %v, want DeadlineExceeded", err)
	}
	releaseA()
	ctx, cancel = context.WithTimeout(bg, patience)
	defer cancel()
	lostB, releaseB, err := b.Lead(ctx, "ttl")
	if err != nil {
		t.Fatalf("B's Lead after A released: %v", err)
	}
	select {
	case <-lostA:
		t.Fatal("A's lost closed on release")
	default:
	}
	got := make(chan error, 1)
	go func() {
		_, release, err := a.Lead(ctx, "ttl")
		if err == nil {
			defer release()
		}
		got <- err
	}()
	time.Sleep(settle)
	sever(b)
	select {
	case <-lostB:
	case <-time.After(patience):
		t.Fatalf("B's lost still open %v after its connection broke", patience)
	}
	if err := <-got; err != nil {
		t.Fatalf("A's Lead after B lost the duty: %v", err)
	}
	releaseB() // after the loss: harmless
}

// testCancelledShared: a call made with a context that has ended fails with
// an error wrapping the context's, and a lock asked for so is not taken:
// another handle takes it at once.
func testCancelledShared(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	live := t.Context()
	ctx, cancel := context.WithCancel(live)
	cancel()
	want := func(name string, err error) { t.Helper(); wantCanceled(t, name, err) }
	want("NewSharedBatch", closed(a.NewSharedBatch(ctx)))
	_, err := a.Watermark(ctx)
	want("Watermark", err)
	_, _, err = a.GetAll(ctx, [][]byte{[]byte("k")})
	want("GetAll", err)
	sb := newShared(t, a)
	defer sb.Close()
	want("Lock", sb.Lock(ctx, []byte("x"), true))
	_, err = sb.Begin(ctx, []storage.LockRequest{{Key: []byte("y"), Exclusive: true}}, nil, true)
	want("Begin", err)
	_, err = storage.GetMany(ctx, sb, [][]byte{[]byte("k"), []byte("x")})
	want("GetMany", err)
	other := newShared(t, b)
	defer other.Close()
	lctx, lcancel := context.WithTimeout(live, patience)
	defer lcancel()
	if err := other.Lock(lctx, []byte("x"), true); err != nil {
		t.Fatalf("lock x on the other handle after a cancelled Lock: %v", err)
	}
	if err := other.Lock(lctx, []byte("y"), true); err != nil {
		t.Fatalf("lock y on the other handle after a cancelled Begin: %v", err)
	}
}

// testSharedInsertExisting: a shared batch that inserts as new a key that
// another handle wrote after the batch began fails its commit with
// ErrExists, applies none of its writes and lets its locks go; on a store
// whose batches do not check (storage.Inserter), there is nothing to hold.
func testSharedInsertExisting(t *testing.T, a, b storage.Shared, _ func(storage.Shared)) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	x := newShared(t, a)
	defer x.Close()
	if _, checks := x.(storage.Inserter); !checks {
		return
	}
	if _, err := x.Begin(ctx, []storage.LockRequest{{Key: []byte("lock"), Exclusive: true}}, [][]byte{[]byte("k")}, true); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	commit(t, b, "k", "theirs")
	if err := x.Set([]byte("mine"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := storage.Insert(x, []byte("k"), []byte("ours")); err != nil {
		t.Fatal(err)
	}
	if _, err := x.CommitWatermark(ctx); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("CommitWatermark of a key inserted as new that another handle wrote: %v, want ErrExists", err)
	}
	if got := get(t, a, "k"); got != "theirs" {
		t.Fatalf("k = %q after the failed commit, want the other handle's value", got)
	}
	if got := get(t, b, "mine"); got != deleteMark {
		t.Fatalf("the failed batch's other write was applied: mine = %q", got)
	}
	y := newShared(t, b)
	defer y.Close()
	lock(t, y, "lock", true) // the failed batch's lock is free
}
