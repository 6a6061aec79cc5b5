package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
)

// TestIndexAnswersMatchFullScans writes, replaces and deletes random items in
// two containers, one indexed and one with indexing off, and checks that
// every filter query gives the same results from the index as from a scan.
func TestIndexAnswersMatchFullScans(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"ix","partitionKey":{"paths":["/pk"]}}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"scan","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	values := []string{`0`, `1`, `-1`, `2.5`, `-0`, `1e300`, `"a"`, `"ab"`, `"abc"`, `"b"`, `""`, `"a\u0000b"`, `null`, `true`, `false`, `[1]`, `{"x":1}`}
	// Strings around maxIndexedString: indexed whole, and cut with the same
	// or different first bytes.
	long := strings.Repeat("x", maxIndexedString)
	values = append(values, `"`+long+`"`, `"`+long+`a"`, `"`+long+`ab"`, `"`+long+`b"`, `"`+long[1:]+`y"`,
		`"`+long[1:]+`yz"`, `"`+long+`\u0000c"`, `"`+long[2:]+`\u0000\u0000z"`)
	write := func(id int) {
		pk := fmt.Sprintf("p%d", id%4)
		doc := fmt.Sprintf(`{"id":"%d","pk":%q,"v":%s,"n":{"w":%s},"k":%d}`, id, pk, values[rng.IntN(len(values))], values[rng.IntN(len(values))], id)
		if rng.IntN(5) == 0 {
			doc = fmt.Sprintf(`{"id":"%d","pk":%q}`, id, pk)
		}
		for _, c := range []string{"ix", "scan"} {
			if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: c, Body: []byte(doc)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 300; i++ {
		write(rng.IntN(120))
		if rng.IntN(10) == 0 {
			id := rng.IntN(120)
			for _, c := range []string{"ix", "scan"} {
				e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: c, ID: fmt.Sprint(id), PartitionKey: StringKey(fmt.Sprintf("p%d", id%4)), HasPartitionKey: true})
			}
		}
	}
	queries := []string{"SELECT c.id FROM c WHERE c.v = @a", "SELECT c.id FROM c WHERE c.n.w = @a",
		"SELECT c.id FROM c WHERE c.v > @a", "SELECT c.id FROM c WHERE c.v >= @a", "SELECT c.id FROM c WHERE c.v < @a",
		"SELECT c.id FROM c WHERE c.v <= @a", "SELECT c.id FROM c WHERE c.v IN (@a, @b)",
		"SELECT c.id FROM c WHERE c.v BETWEEN @a AND @b", "SELECT c.id FROM c WHERE STARTSWITH(c.v, @a)",
		"SELECT VALUE COUNT(1) FROM c WHERE c.v = @a", "SELECT c.id FROM c WHERE c.v = @a AND c.k > 10",
		"SELECT TOP 5 VALUE c.v FROM c ORDER BY c.v DESC", "SELECT TOP 40 VALUE c.n.w FROM c ORDER BY c.n.w DESC",
		"SELECT VALUE c.v FROM c WHERE c.v >= @a ORDER BY c.v OFFSET 2 LIMIT 3",
		"SELECT VALUE c.v FROM c WHERE c.v < @a ORDER BY c.v DESC OFFSET 1 LIMIT 30",
		"SELECT TOP 3 VALUE c.v FROM c ORDER BY c.v", "SELECT TOP 7 VALUE [c.v, c.k] FROM c WHERE c.k > 100 ORDER BY c.v DESC"}
	checked := 0
	for _, q := range queries {
		for _, a := range values {
			b := values[rng.IntN(len(values))]
			params := map[string]json.RawMessage{"@a": json.RawMessage(a), "@b": json.RawMessage(b)}
			for _, pk := range []*PartitionKey{nil, ptr(StringKey("p1"))} {
				run := func(c string) []string {
					r := &QueryRequest{Database: "db", Container: c, Query: q, Params: params, MaxItems: 7}
					if pk != nil {
						r.PartitionKey, r.HasPartitionKey = *pk, true
					} else {
						r.SinglePartitionKeyRange = true
					}
					out := queryPages(t, e, r)
					if !strings.Contains(q, "ORDER BY") {
						slices.Sort(out)
					}
					return out
				}
				got, want := run("ix"), run("scan")
				if strings.Contains(q, "[c.v, c.k]") {
					// Ties on c.v may come in any order: compare the order values.
					got, want = orderValues(got), orderValues(want)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s with @a=%s @b=%s (pk %v): index gave %v, scan %v", q, a, b, pk, got, want)
				}
				checked++
			}
		}
	}
	t.Logf("%d filter queries agree between index and scan", checked)
}

func ptr[T any](v T) *T { return &v }

func TestIndexIsUsedForFilters(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	c, _ := e.Container(ctx, "db", "c")
	tests := []struct {
		q    string
		used bool
	}{
		{"SELECT * FROM c WHERE c.a = 1", true},
		{"SELECT * FROM c WHERE c.a.b IN ('x','y')", true},
		{"SELECT * FROM c WHERE c.a > 1 AND c.b = 2", true},
		{"SELECT * FROM c WHERE STARTSWITH(c.name, 'ab')", true},
		{"SELECT * FROM c WHERE c.a = 1 OR c.b = 2", false},
		{"SELECT * FROM c WHERE LOWER(c.a) = 'x'", false},
		{"SELECT * FROM c", false},
	}
	for _, tt := range tests {
		q, err := query.Parse(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := q.Plan(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, used := c.chooseIndex(plan); used != tt.used {
			t.Errorf("%s: index used = %v, want %v (filters %v)", tt.q, used, tt.used, plan.Filters)
		}
	}
}

func orderValues(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var pair []json.RawMessage
		json.Unmarshal([]byte(r), &pair)
		if len(pair) > 0 {
			out[i] = string(pair[0])
		}
	}
	return out
}

// TestIndexAfterWritesIsAFreshRebuild: after creates, replaces that keep,
// change, add and drop properties (nested, long and escaped ones among
// them) and deletes, the index holds exactly the entries a rebuild
// from the items writes: no stale entry is left and none is missing.
func TestIndexAfterWritesIsAFreshRebuild(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	long := strings.Repeat("y", maxIndexedString+5)
	values := []string{`1`, `2`, `"a"`, `"b\u0000"`, `"` + long + `"`, `null`, `true`, `[1,2]`, `{"x":1,"y":{"z":"q"}}`, `{"x":2}`}
	for i := 0; i < 400; i++ {
		id := rng.IntN(40)
		pk := fmt.Sprintf("p%d", id%3)
		doc := fmt.Sprintf(`{"id":"%d","pk":%q,"a":%s`, id, pk, values[rng.IntN(len(values))])
		for _, f := range rng.Perm(5)[:rng.IntN(4)] {
			doc += fmt.Sprintf(`,"f%d":%s`, f, values[rng.IntN(len(values))])
		}
		doc += "}"
		if rng.IntN(8) == 0 {
			e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: fmt.Sprint(id), PartitionKey: StringKey(pk), HasPartitionKey: true})
			continue
		}
		if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(doc)}); err != nil {
			t.Fatal(doc, err)
		}
	}
	got := keysUnder(t, e.store, keys.IndexPrefix(c.rid))
	if err := e.rebuilder.rebuildIndex(ctx, c); err != nil {
		t.Fatal(err)
	}
	if fresh := keysUnder(t, e.store, keys.IndexPrefix(c.rid)); !slices.Equal(got, fresh) {
		t.Errorf("the index after the writes (%d entries) differs from a fresh rebuild (%d)", len(got), len(fresh))
	}
}

// TestDefaultPolicyEntriesAreThoseItsPathsIndex: for a policy that indexes
// every path (the default, with or without /"_etag"/? excluded), the write
// path's entries, which skip asking the policy per path, are exactly those
// of asking it; and a policy excluding a path is not taken for one that
// indexes all.
func TestDefaultPolicyEntriesAreThoseItsPathsIndex(t *testing.T) {
	doc := []byte(`{"id":"1","pk":"p","a":1,"_etag":"x","n":{"_etag":2,"x~/y":"z","m":{"k":[1]}},"big":{"v":3},"s":"t"}`)
	obj, err := jsondoc.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	key := append(append([]byte{'D'}, make([]byte, 8)...), "suffix"...)
	for _, policy := range []string{
		`{}`,
		`{"includedPaths":[{"path":"/*"}]}`,
		`{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/\"_etag\"/?"}]}`,
		`{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/big/*"}]}`,
		`{"includedPaths":[{"path":"/a/?"}],"excludedPaths":[{"path":"/*"}]}`,
	} {
		var ip map[string]any
		json.Unmarshal([]byte(policy), &ip)
		c := &Container{rid: make([]byte, 8), index: indexpolicy.New(map[string]any{"indexingPolicy": ip})}
		got, err := c.objectIndexEntries(obj, key)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(policy, "big") && c.index.All {
			t.Errorf("%s: the policy is taken for one that indexes every path", policy)
		}
		asked := *c.index
		asked.All = false
		c.index = &asked
		want, err := c.objectIndexEntries(obj, key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("%s: %d entries, asking the policy per path gives %d", policy, len(got), len(want))
		}
	}
}
