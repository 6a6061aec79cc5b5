package engine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
)

// TestTurningTTLOnBuildsTheExpiryIndex: a container's expiry index follows
// its defaultTtl: none while TTL is off, the items with their own ttl under
// -1, every item that may expire under a default; items expire and are
// swept at the same moments as if the index had always been kept, and
// turning TTL off drops the index.
func TestTurningTTLOnBuildsTheExpiryIndex(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	const pk = `"partitionKey":{"paths":["/pk"]}`
	createContainer(t, e, `{"id":"c",`+pk+`}`)
	c, _ := e.Container(ctx, "db", "c")
	start := clock.now().Unix()
	upsert(t, e, "c", `{"id":"own","pk":"p","ttl":20}`)
	upsert(t, e, "c", `{"id":"never","pk":"p","ttl":-1}`)
	for i := range 3 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i))
	}
	setTTL := func(ttl string) {
		t.Helper()
		body := `{"id":"c",` + pk
		if ttl != "" {
			body += `,"defaultTtl":` + ttl
		}
		if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(body+"}"), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Get(ctx, keys.ExpiryRebuild(c.rid)); err == nil {
			t.Errorf("defaultTtl %q: the build's mark is left", ttl)
		}
	}
	entries := func(want int, when string) {
		t.Helper()
		if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != want {
			t.Errorf("%s: %d expiry entries, want %d", when, n, want)
		}
	}
	entries(0, "TTL off")
	setTTL("-1")
	entries(1, "defaultTtl -1")
	setTTL("60")
	entries(4, "defaultTtl 60")
	clock.advance(time.Duration(start+20-clock.now().Unix())*time.Second - time.Nanosecond)
	if n, err := e.sweeper.sweep(ctx); n != 0 || err != nil {
		t.Fatalf("a second before the first deadline the sweep deleted %d items (%v)", n, err)
	}
	clock.advance(time.Second)
	if n, err := e.sweeper.sweep(ctx); n != 1 || err != nil {
		t.Fatalf("at the own ttl's deadline the sweep deleted %d items (%v), want 1", n, err)
	}
	entries(3, "after the first sweep")
	setTTL("")
	entries(0, "TTL off again")
	clock.advance(time.Hour)
	if n, err := e.sweeper.sweep(ctx); n != 0 || err != nil {
		t.Fatalf("TTL off: the sweep deleted %d items (%v)", n, err)
	}
	if _, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "i0", PartitionKey: StringKey("p0"), HasPartitionKey: true}); err != nil {
		t.Errorf("TTL off, an hour later: reading i0: %v", err)
	}
	if q, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: "SELECT VALUE c.id FROM c"}); err != nil || len(q.Items) != 4 {
		t.Errorf("TTL off, an hour later: the items counted %v (%v), want 4", q, err)
	}
	setTTL("60")
	entries(3, "defaultTtl 60 again")
	if n, err := e.sweeper.sweep(ctx); n != 3 || err != nil {
		t.Fatalf("a 60 s default an hour after the writes: the sweep deleted %d items (%v), want 3", n, err)
	}
	if _, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "never", PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
		t.Errorf("the item with ttl -1: %v", err)
	}
}

// TestExpiryBuildCutShortIsFinishedAtOpen: a build of the expiry index a
// crash cut short (its mark left, its entries half written) is done again
// by the next Open, and the items expire on time.
func TestExpiryBuildCutShortIsFinishedAtOpen(t *testing.T) {
	ctx := t.Context()
	clock := newTestClock()
	s := newTestStore(t)
	open := func() *Engine {
		e, err := Open(ctx, s, Options{Now: clock.now, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":10}`)
	for i := range 5 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d"}`, i, i))
	}
	c, _ := e.Container(ctx, "db", "c")
	e.Close()
	// The crash: the mark is stored, two entries of five are gone.
	b := s.NewBatch()
	if err := b.Set(keys.ExpiryRebuild(c.rid), nil); err != nil {
		t.Fatal(err)
	}
	it, err := s.NewIterator(ctx, keys.ExpiryPrefix(c.rid), storage.PrefixEnd(keys.ExpiryPrefix(c.rid)), false)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2 && it.Next(); n++ {
		if err := b.Delete(slices.Clone(it.Key())); err != nil {
			t.Fatal(err)
		}
	}
	it.Close()
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	e = open()
	defer e.Close()
	if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != 5 {
		t.Errorf("after Open: %d expiry entries, want 5", n)
	}
	if _, err := s.Get(ctx, keys.ExpiryRebuild(c.rid)); err == nil {
		t.Error("the build's mark is left after Open")
	}
	clock.advance(10 * time.Second)
	if n, err := e.sweeper.sweep(ctx); n != 5 || err != nil {
		t.Errorf("10 s later the sweep deleted %d items (%v), want 5", n, err)
	}
}

// legacyExpiryKey is an item's expiry entry as layout format 2 kept it:
// for every item but those with ttl -1, whatever its container's TTL.
func legacyExpiryKey(collRID []byte, it *storedItem) []byte {
	if it.ttl == -1 {
		return nil
	}
	rid := binary.BigEndian.AppendUint64(nil, it.rid)
	if it.ttl > 0 {
		return keys.ExpiryKey(collRID, keys.ExpiryByDeadline, it.ts+int64(it.ttl), rid)
	}
	return keys.ExpiryKey(collRID, keys.ExpiryByModified, it.ts, rid)
}

// expiryContainers are the containers of the expiry layout upgrade test:
// TTL off, on without default, on with a 10 s default.
var expiryContainers = []struct {
	id, ttl      string
	entriesAfter int // expiry entries after the upgrade
	swept        int // items the sweep deletes 30 s after the writes
}{
	{"off", "", 0, 0},
	{"on", "-1", 1, 1},
	{"default", "10", 2, 2},
}

// writeOldExpiryLayout fills s as an engine of layout format 2 would
// have: three containers (expiryContainers) with an item that inherits the
// defaultTtl, one with its own ttl of 5 s and one with ttl -1 each, an
// expiry entry for every item but the last, and format 2 recorded.
func writeOldExpiryLayout(t *testing.T, s storage.Store, clock *testClock) {
	t.Helper()
	ctx := t.Context()
	e, err := Open(ctx, s, Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	var rids [][]byte
	for _, tc := range expiryContainers {
		body := `{"id":"` + tc.id + `","partitionKey":{"paths":["/pk"]}`
		if tc.ttl != "" {
			body += `,"defaultTtl":` + tc.ttl
		}
		createContainer(t, e, body+"}")
		for _, item := range []string{`{"id":"inherits","pk":"p","n":1}`, `{"id":"own","pk":"p","n":2,"ttl":5}`, `{"id":"never","pk":"p","n":3,"ttl":-1}`} {
			upsert(t, e, tc.id, item)
		}
		c, _ := e.Container(ctx, "db", tc.id)
		rids = append(rids, c.rid)
	}
	e.Close()
	b := s.NewBatch()
	defer b.Close()
	n := 0
	for _, rid := range rids {
		p := keys.ItemContainerPrefix(rid)
		it, err := s.NewIterator(ctx, p, storage.PrefixEnd(p), false)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			item, err := decodeItem(slices.Clone(it.Key()), slices.Clone(it.Value()))
			if err != nil {
				t.Fatal(err)
			}
			if k := legacyExpiryKey(rid, item); k != nil {
				if err := b.Set(k, item.key); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n != 6 {
		t.Fatalf("%d format-2 expiry entries written, want 6", n)
	}
	if err := b.Set(keys.MetaFormat, binary.BigEndian.AppendUint64(nil, 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkUpgradedExpiry opens s, written by writeOldExpiryLayout, and checks
// the expiry entries each container keeps, the format, the items, and that
// they expire and are swept when they did before.
func checkUpgradedExpiry(t *testing.T, s storage.Store, clock *testClock) {
	t.Helper()
	ctx := t.Context()
	e, err := Open(ctx, s, Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	v, err := s.Get(ctx, keys.MetaFormat)
	if err != nil || len(v) != 8 || binary.BigEndian.Uint64(v) != keys.Format {
		t.Errorf("format record %x, %v; want %d", v, err, keys.Format)
	}
	ids := func(coll string) string {
		t.Helper()
		q, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: coll, Query: "SELECT VALUE c.id FROM c WHERE c.n > 0 ORDER BY c.n",
			PartitionKey: StringKey("p"), HasPartitionKey: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range q.Items {
			out = append(out, string(it))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range expiryContainers {
		c, err := e.Container(ctx, "db", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != tc.entriesAfter {
			t.Errorf("%s: %d expiry entries after the upgrade, want %d", tc.id, n, tc.entriesAfter)
		}
		if got := ids(tc.id); got != `"inherits","own","never"` {
			t.Errorf("%s: the items after the upgrade: %s", tc.id, got)
		}
	}
	clock.advance(30 * time.Second)
	for _, tc := range expiryContainers {
		c, _ := e.Container(ctx, "db", tc.id)
		n, err := 0, error(nil) // the sweep passes containers without TTL
		if c.ttl != nil {
			n, err = e.sweeper.sweepContainer(ctx, c)
		}
		if err != nil || n != tc.swept {
			t.Errorf("%s: 30 s later the sweep deleted %d items (%v), want %d", tc.id, n, err, tc.swept)
		}
		if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != 0 {
			t.Errorf("%s: %d expiry entries after the sweep, want 0", tc.id, n)
		}
	}
	for coll, want := range map[string]string{"off": `"inherits","own","never"`, "on": `"inherits","never"`, "default": `"never"`} {
		if got := ids(coll); got != want {
			t.Errorf("%s: the items 30 s later: %s, want %s", coll, got, want)
		}
	}
	// New writes keep to the new layout.
	upsert(t, e, "off", `{"id":"new","pk":"p","ttl":5}`)
	upsert(t, e, "default", `{"id":"new","pk":"p"}`)
	for coll, want := range map[string]int{"off": 0, "default": 1} {
		c, _ := e.Container(ctx, "db", coll)
		if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != want {
			t.Errorf("%s: %d expiry entries after a new write, want %d", coll, n, want)
		}
	}
}

// TestOldExpiryLayoutIsUpgradedAtOpen opens a store in key layout format
// 2, which kept an expiry entry for every item that may expire in every
// container, on Pebble and on the pass's store (memory, shared memory or
// PostgreSQL): Open drops the entries the containers' defaultTtl does not
// keep, nothing else is lost, and the items expire when they did.
func TestOldExpiryLayoutIsUpgradedAtOpen(t *testing.T) {
	skipOnPlaced(t, "a store of layout format 2 is one database")
	t.Run("pebble", func(t *testing.T) {
		dir := t.TempDir()
		open := func() storage.Store {
			s, err := pebble.Open(dir, pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		clock := newTestClock()
		s := open()
		writeOldExpiryLayout(t, s, clock)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		defer s.Close()
		checkUpgradedExpiry(t, s, clock)
	})
	t.Run("pass", func(t *testing.T) {
		clock := newTestClock()
		s := newTestStore(t)
		writeOldExpiryLayout(t, s, clock)
		checkUpgradedExpiry(t, s, clock)
	})
}
