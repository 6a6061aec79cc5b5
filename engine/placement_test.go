package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/placed"
)

// On a store over two databases, each of a container's ranges lives in
// one: an item, its index, feed, RID and order entries are all in its
// range's place and nowhere else; both places hold ranges; a split's
// children stay where their parent was, and a change-feed reader of each
// range reads every item once.
func TestEachRangesItemsAndEntriesLiveInItsPlaceOnly(t *testing.T) {
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
	for _, ch := range children {
		r, _ := c.partitionKeyRange(ch.ID)
		if r.Place != parent.Place {
			t.Errorf("child %s of range %s placed in %d, its parent in %d", ch.ID, parent.ID, r.Place, parent.Place)
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
