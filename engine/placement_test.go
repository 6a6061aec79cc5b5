package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/placed"
)

// On a store over two databases, each of a container's ranges lives in
// one: an item, its index, feed, RID and order entries are all in its
// range's place and nowhere else; both places hold ranges; a split keeps
// its first child where its parent was and moves the second, items and
// entries, to the other place; and a change-feed reader of each range
// reads every item once.
func TestEachRangesItemsAndEntriesLiveInItsPlaceOnly(t *testing.T) {
	skipOnPostgres(t, "it makes its own two places in memory")
	ctx := t.Context()
	places := []*memory.SharedStore{memory.NewShared(), memory.NewShared()}
	store := placed.New(places[0], places[1])
	e, err := Open(ctx, store, Options{PartitionKeyRanges: 4, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"],"version":2}}`)
	const items = 80
	write := func(prefix string) {
		for i := range items {
			upsert(t, e, "c", fmt.Sprintf(`{"id":"%s%d","pk":"p%d","v":%d}`, prefix, i, i, i))
		}
	}
	write("a")
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	// placeOf is the place of an item key, from the range map alone.
	placeOf := func(c *Container, itemKey []byte) int {
		epk := c.itemEPK(itemKey)
		for _, r := range c.ranges().Ranges {
			b, _ := c.requestBounds(r.ID, "", "")
			if b.containsEPK(epk) {
				return r.Place
			}
		}
		t.Fatalf("no range holds EPK %x", epk)
		return -1
	}
	check := func(c *Container, want int) {
		t.Helper()
		perPlace := make([]int, 2)
		for i, p := range places {
			// Every item, and every entry naming an item, of place i is
			// of a range placed there.
			for _, family := range [][]byte{keys.ItemContainerPrefix(c.rid), keys.FeedPrefix(c.rid), keys.RIDPrefix(c.rid), keys.OrderPrefix(c.rid), keys.IndexPrefix(c.rid)} {
				it, err := p.NewIterator(ctx, family, storage.PrefixEnd(family), false)
				if err != nil {
					t.Fatal(err)
				}
				for it.Next() {
					itemKey := it.Value()
					switch family[0] {
					case keys.Item:
						itemKey = it.Key()
						perPlace[i]++
					case keys.Index:
						// I<coll 8><path length, uvarint><path><value><item key suffix>
						l, w := binary.Uvarint(it.Key()[9:])
						itemKey = c.indexedItemKey(it.Key(), 9+w+int(l))
					}
					if !bytes.HasPrefix(itemKey, keys.ItemContainerPrefix(c.rid)) {
						t.Fatalf("place %d: %q entry %x names no item: %x", i, family[:1], it.Key(), itemKey)
					}
					if got := placeOf(c, itemKey); got != i {
						t.Fatalf("place %d holds a %q entry of an item of a range placed in %d", i, family[:1], got)
					}
				}
				it.Close()
			}
		}
		if perPlace[0] == 0 || perPlace[1] == 0 || perPlace[0]+perPlace[1] != want {
			t.Fatalf("items per place: %v, want %d over both", perPlace, want)
		}
	}
	check(c, items)

	parent := c.ranges().Ranges[0]
	children, err := e.SplitPartitionKeyRange(ctx, "db", "c", parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = e.Container(ctx, "db", "c"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range children {
		r, _ := c.partitionKeyRange(ch.ID)
		if want := (parent.Place + i) % 2; r.Place != want {
			t.Errorf("child %d (%s) of range %s placed in %d, want %d (its parent's is %d)", i, ch.ID, parent.ID, r.Place, want, parent.Place)
		}
	}
	write("b")
	check(c, 2*items)

	seen := map[string]int{}
	for _, r := range c.ranges().Ranges {
		docs, _ := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", PartitionKeyRangeID: r.ID})
		for _, d := range decodeDocs[feedDoc](t, docs) {
			seen[d.ID]++
		}
	}
	if len(seen) != 2*items {
		t.Errorf("the ranges' change feeds hold %d items, want %d", len(seen), 2*items)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s in the ranges' feeds %d times", id, n)
		}
	}
}

// A split that moves a range to the other database while 16 writers on two
// gateways write to it loses and doubles nothing: every acknowledged write
// is read back with its value through both gateways, each item is stored
// once, and a change-feed reader of the parent range, following its
// continuation into the children after the split's 410, reads every
// acknowledged item exactly once.
func TestARangeMovedUnderSixteenWritersLosesAndDoublesNothing(t *testing.T) {
	skipOnPostgres(t, "it makes its own two places in memory")
	ctx := t.Context()
	a, b := memory.NewShared(), memory.NewShared()
	stores := []*placed.Store{placed.New(a, b), placed.New(a.Open(), b.Open())}
	var gws []*Engine
	for _, s := range stores {
		e, err := Open(ctx, s, Options{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); s.Close() })
		gws = append(gws, e)
	}
	if _, err := gws[0].CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, gws[0], `{"id":"c","partitionKey":{"paths":["/pk"],"version":2}}`)

	// Writers write until stop: before the split, while it moves the
	// range (they wait on the catalog lock), and after.
	const writers, each = 16, 20
	var mu sync.Mutex
	acked := map[string]int{}
	var written atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			e := gws[w%2]
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				body := fmt.Sprintf(`{"id":%q,"pk":"p%d","v":%d}`, id, (w*each+i)%40, i)
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
					t.Errorf("upsert %s: %v", id, err)
					return
				}
				mu.Lock()
				acked[id] = i
				mu.Unlock()
				written.Add(1)
			}
		})
	}

	// The reader, on the second gateway: range "0" until it is gone, then
	// its children from its last continuation.
	seen := map[string]int{}
	read := func(rangeID, cont string) (string, error) {
		for page := 0; page < 4 || stop.Load(); page++ {
			res, err := gws[1].ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", PartitionKeyRangeID: rangeID, Continuation: cont, MaxItems: 50})
			if err != nil {
				return cont, err
			}
			for _, d := range decodeDocs[feedDoc](t, res.Items) {
				seen[d.ID]++
			}
			cont = res.ETag
			if res.NotModified || len(res.Items) == 0 {
				return cont, nil
			}
		}
		return cont, nil
	}
	cont := ""
	for written.Load() < writers*each/2 {
		var err error
		if cont, err = read("0", cont); err != nil {
			t.Fatal(err)
		}
	}
	children, err := gws[0].SplitPartitionKeyRange(ctx, "db", "c", "0")
	if err != nil {
		t.Fatal(err)
	}
	var gone *Error
	if _, err := read("0", cont); !errors.As(err, &gone) || gone.Status != 410 || gone.SubStatus != SubStatusPartitionKeyRangeGone {
		t.Fatalf("the parent's feed after the split: %v, want 410/1002", err)
	}
	conts := []string{cont, cont}
	after := written.Load() + writers*each
	for done := false; !done; {
		if written.Load() >= after || t.Failed() {
			stop.Store(true)
			wg.Wait()
			done = true
		}
		for i, ch := range children {
			if conts[i], err = read(ch.ID, conts[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, ch := range children {
		if _, err = read(ch.ID, conts[i]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d writes acknowledged", len(acked))
	for id, v := range acked {
		if n := seen[id]; n != 1 {
			t.Errorf("the reader saw %s %d times", id, n)
		}
		for g, e := range gws {
			var w, i int
			fmt.Sscanf(id, "w%d-%d", &w, &i)
			res, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey(fmt.Sprintf("p%d", (w*each+i)%40)), HasPartitionKey: true})
			if err != nil {
				t.Fatalf("gateway %d reads %s: %v", g, id, err)
			}
			var doc struct{ V int }
			json.Unmarshal(res.Body, &doc)
			if doc.V != v {
				t.Fatalf("gateway %d reads %s at v=%d, acknowledged %d", g, id, doc.V, v)
			}
		}
	}
	c, _ := gws[0].Container(ctx, "db", "c")
	stored := 0
	for i, p := range []*memory.SharedStore{a, b} {
		prefix := keys.ItemContainerPrefix(c.rid)
		it, _ := p.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
		n := 0
		for it.Next() {
			n++
		}
		it.Close()
		if r, _ := c.partitionKeyRange(children[1].ID); n == 0 {
			t.Errorf("place %d holds no items; the moved child is in place %d", i, r.Place)
		}
		stored += n
	}
	if stored != len(acked) {
		t.Errorf("%d items stored over both places, want %d", stored, len(acked))
	}
}
