package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestItemNamesOutliveTheBodiesTheyWereParsedFrom: a write's parse takes
// its property names' strings from the names the container kept from the
// writes before (keepItemNames), never from a body's bytes. Bodies of
// varying shapes (shared names, new ones, more than maxItemNames, names
// with escapes) are written from one buffer that each next write
// overwrites; every item reads back with the properties it was written
// with.
func TestItemNamesOutliveTheBodiesTheyWereParsedFrom(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	r := rand.New(rand.NewPCG(43, 7))
	pool := []string{"n", "tags", "nested", "payload", "a", "bb", "ccc", `esc\u0061ped`, "é", "x1", "x2"}
	for i := range 40 {
		pool = append(pool, fmt.Sprintf("p%02d", i))
	}
	buf := make([]byte, 0, 8192)
	want := map[string]map[string]any{}
	for i := range 300 {
		id := fmt.Sprintf("i%d", r.IntN(40))
		props := map[string]any{"id": id, "pk": "p1"}
		for range r.IntN(len(pool)) {
			props[pool[r.IntN(len(pool))]] = float64(r.IntN(100))
		}
		body, err := json.Marshal(props)
		if err != nil {
			t.Fatal(err)
		}
		// Unescape the name written escaped, as a client may send it.
		body = []byte(strings.ReplaceAll(string(body), `"esc\\u0061ped"`, `"esc\u0061ped"`))
		buf = append(buf[:0], body...)
		var req *ItemRequest
		if i%2 == 0 {
			req = &ItemRequest{Database: "db", Container: "c", Body: buf}
			_, err = e.UpsertItem(ctx, req)
		} else if _, exists := want[id]; exists {
			req = &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey("p1"), HasPartitionKey: true, Body: buf}
			_, err = e.ReplaceItem(ctx, req)
		} else {
			continue
		}
		if err != nil {
			t.Fatalf("write %d %s: %v", i, body, err)
		}
		var decoded map[string]any
		if err := json.Unmarshal(body, &decoded); err != nil {
			t.Fatal(err)
		}
		want[id] = decoded
		for j := range buf {
			buf[j] = 'z'
		}
	}
	for id, props := range want {
		res, err := e.ReadItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey("p1"), HasPartitionKey: true})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(res.Body, &got); err != nil {
			t.Fatalf("%s: %v: %s", id, err, res.Body)
		}
		maps.DeleteFunc(got, func(k string, _ any) bool { return strings.HasPrefix(k, "_") })
		if !maps.Equal(got, props) && fmt.Sprint(got) != fmt.Sprint(props) {
			t.Errorf("%s reads back %v, written %v", id, got, props)
		}
	}
}

// TestAReplaceShapedAsTheLastWriteParsesWithoutAllocating: once a
// container has parsed an item, a body with the same properties takes
// every name from the kept ones and its id from the request's: the parse
// makes no allocation.
func TestAReplaceShapedAsTheLastWriteParsesWithoutAllocating(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(benchDoc("item-1", 1))
	var it item
	parse := func() {
		if err := c.parseItemInto(&it, body, &ItemRequest{PartitionKey: StringKey("p1"), HasPartitionKey: true}, "item-1"); err != nil {
			t.Fatal(err)
		}
	}
	parse()
	if n := testing.AllocsPerRun(100, parse); n != 0 {
		t.Errorf("a parse of an item shaped as the last makes %v allocations, want 0", n)
	}
	if it.id != "item-1" || len(it.obj) != 6 || it.obj[5].Name != "payload" {
		t.Errorf("parsed id %q, %d properties", it.id, len(it.obj))
	}
}
