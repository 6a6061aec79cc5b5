package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
)

// diffDoc is an item of the replace tests as its top-level properties in
// order (name, raw JSON value).
type diffDoc [][2]string

func (d diffDoc) body() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", f[0], f[1])
	}
	b.WriteByte('}')
	return b.String()
}

// diffValues are the values a replace gives a property: scalars, arrays,
// nested objects (two of them sharing a path with different leaves), a
// point and a polygon (the spatial index's), and long strings.
var diffValues = []string{`1`, `2`, `-0`, `"a"`, `"A"`, `"b\u0000"`, `null`, `true`, `[1,2]`, `["a",{"x":1}]`,
	`{"x":1}`, `{"x":1,"y":{"z":"q"}}`, `{"y":2}`, `{}`, `[]`,
	`{"type":"Point","coordinates":[10.5,20.25]}`, `{"type":"Point","coordinates":[-3,4]}`,
	`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}`,
	`"` + strings.Repeat("y", maxIndexedString+5) + `"`, `"` + strings.Repeat("y", maxIndexedString+5) + `z"`}

// replaceOneProperty changes d as a replace of the benchmark's kind does
// (one property's value), or else adds or drops a property or moves one;
// never id or pk.
func replaceOneProperty(rng *rand.Rand, d diffDoc) diffDoc {
	d = slices.Clone(d)
	names := []string{"a", "b", "name", "loc", "d"}
	switch k := rng.IntN(8); {
	case k < 5 && len(d) > 2:
		i := 2 + rng.IntN(len(d)-2)
		d[i][1] = diffValues[rng.IntN(len(diffValues))]
	case k == 5:
		if n := names[rng.IntN(len(names))]; !slices.ContainsFunc(d, func(f [2]string) bool { return f[0] == n }) {
			d = append(d, [2]string{n, diffValues[rng.IntN(len(diffValues))]})
		}
	case k == 6 && len(d) > 2:
		i := 2 + rng.IntN(len(d)-2)
		d = slices.Delete(d, i, i+1)
	case len(d) > 3:
		i, j := 2+rng.IntN(len(d)-2), 2+rng.IntN(len(d)-2)
		d[i], d[j] = d[j], d[i]
	}
	return d
}

// TestIndexAfterReplacesOfSomePropertiesIsAFreshRebuild: replaces that
// change one property, add, drop, repeat or move one leave the index
// exactly as a rebuild from the items writes it, in a container with
// computed properties (evaluated over the whole item, one of them over two
// properties) and spatial indexes
// (under a property): a replace writes only the entries of the properties
// it changed, and none of theirs is left stale or missing.
func TestIndexAfterReplacesOfSomePropertiesIsAFreshRebuild(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	createContainer(t, e, `{"id":"cs","partitionKey":{"paths":["/pk"]},
		"computedProperties":[{"name":"cp_lower","query":"SELECT VALUE LOWER(c.name) FROM c"},{"name":"cp_ax","query":"SELECT VALUE c.a.x FROM c"},{"name":"cp_both","query":"SELECT VALUE IS_DEFINED(c.name) AND IS_DEFINED(c.a) FROM c"}],
		"indexingPolicy":{"includedPaths":[{"path":"/*"},{"path":"/cp_lower/?"},{"path":"/cp_ax/?"},{"path":"/cp_both/?"}],"spatialIndexes":[{"path":"/loc/?","types":["Point","Polygon"]},{"path":"/b/*","types":["Point"]}]}}`)
	c, err := e.Container(ctx, "db", "cs")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	docs := map[int]diffDoc{}
	for i := 0; i < 1500; i++ {
		id := rng.IntN(25)
		d, ok := docs[id]
		if !ok {
			d = diffDoc{{"id", fmt.Sprintf("%q", fmt.Sprint(id))}, {"pk", fmt.Sprintf(`"p%d"`, id%3)},
				{"a", `{"x":"Q"}`}, {"name", `"Mixed"`}, {"loc", diffValues[15]}, {"payload", `"` + strings.Repeat("x", 200) + `"`}}
		} else {
			d = replaceOneProperty(rng, d)
		}
		docs[id] = d
		if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "cs", Body: []byte(d.body())}); err != nil {
			t.Fatal(d.body(), err)
		}
	}
	got := keysUnder(t, e.store, keys.IndexPrefix(c.rid))
	if err := e.rebuilder.rebuildIndex(ctx, c); err != nil {
		t.Fatal(err)
	}
	fresh := keysUnder(t, e.store, keys.IndexPrefix(c.rid))
	if !slices.Equal(got, fresh) {
		stale, missing := 0, 0
		for _, k := range got {
			if _, found := slices.BinarySearch(fresh, k); !found {
				stale++
			}
		}
		for _, k := range fresh {
			if _, found := slices.BinarySearch(got, k); !found {
				missing++
			}
		}
		t.Errorf("the index after the replaces (%d entries) differs from a fresh rebuild (%d): %d stale, %d missing", len(got), len(fresh), stale, missing)
	}
}

// TestReplaceOfOnePropertyAnswersQueriesAsAnUnindexedTwin: an indexed
// container and its twin with indexing off take the same creates and
// replaces of one property at a time; every filter and ORDER BY on every
// property, nested ones and _ts among them, answers alike from the index
// and from a scan.
func TestReplaceOfOnePropertyAnswersQueriesAsAnUnindexedTwin(t *testing.T) {
	ctx := t.Context()
	clock := newTestClock()
	e, err := Open(ctx, newTestStore(t), Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"ix","partitionKey":{"paths":["/pk"]}}`)
	createContainer(t, e, `{"id":"scan","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`)
	rng := rand.New(rand.NewPCG(7, 8))
	docs := map[int]diffDoc{}
	for i := 0; i < 600; i++ {
		if rng.IntN(50) == 0 {
			clock.advance(1e9) // _ts moves on: its entries change with the others
		}
		id := rng.IntN(40)
		d, ok := docs[id]
		if !ok {
			d = diffDoc{{"id", fmt.Sprintf("%q", fmt.Sprint(id))}, {"pk", fmt.Sprintf(`"p%d"`, id%3)},
				{"a", `1`}, {"b", `{"x":1,"y":{"z":"q"}}`}, {"name", `"n"`}}
		} else {
			// One property's value changes; no repeated names, whose
			// filters read the last value only.
			i := 2 + rng.IntN(len(d)-2)
			d = slices.Clone(d)
			d[i][1] = diffValues[rng.IntN(len(diffValues))]
		}
		docs[id] = d
		for _, cont := range []string{"ix", "scan"} {
			if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: cont, Body: []byte(d.body())}); err != nil {
				t.Fatal(d.body(), err)
			}
		}
	}
	queries := []string{"SELECT c.id FROM c WHERE c.a = @v", "SELECT c.id FROM c WHERE c.b.x = @v",
		"SELECT c.id FROM c WHERE c.b.y.z = @v", "SELECT c.id FROM c WHERE c.name > @v",
		"SELECT c.id FROM c WHERE c.a <= @v", "SELECT c.id FROM c WHERE IS_DEFINED(c.b.x) AND c.b.x >= @v",
		"SELECT VALUE COUNT(1) FROM c WHERE c._ts >= @ts", "SELECT c.id FROM c WHERE c._ts = @ts",
		"SELECT VALUE c.a FROM c ORDER BY c.a", "SELECT VALUE c.b.x FROM c ORDER BY c.b.x DESC", "SELECT VALUE c._ts FROM c ORDER BY c._ts DESC"}
	ts := fmt.Sprint(clock.now().Unix())
	checked := 0
	for _, q := range queries {
		for _, v := range diffValues[:14] {
			params := map[string]json.RawMessage{"@v": json.RawMessage(v), "@ts": json.RawMessage(ts)}
			run := func(cont string) []string {
				r := &QueryRequest{Database: "db", Container: cont, Query: q, Params: params, MaxItems: 9, SinglePartitionKeyRange: true}
				out := queryPages(t, e, r)
				if !strings.Contains(q, "ORDER BY") {
					slices.Sort(out)
				}
				return out
			}
			if got, want := run("ix"), run("scan"); !slices.Equal(got, want) {
				t.Fatalf("%s with @v=%s: the index gave %v, a scan %v", q, v, got, want)
			}
			checked++
		}
	}
	t.Logf("%d queries agree between the index and a scan", checked)
}

// TestChangedFieldsLeaveTheIndexDiffAsItWas: for pairs of versions of a
// document, the entries to delete and to set are the same whether every
// property is listed or only those changedFields leaves, with repeated
// names (which a stored record from before names were checked may hold;
// the type entry of one's object value is the other's too), moved and
// escaped ones among them.
func TestChangedFieldsLeaveTheIndexDiffAsItWas(t *testing.T) {
	c := &Container{rid: make([]byte, 8), index: indexpolicy.New(map[string]any{"indexingPolicy": map[string]any{"includedPaths": []any{map[string]any{"path": "/*"}}}})}
	key := append(append([]byte{'D'}, make([]byte, 8)...), "suffix"...)
	docs := []string{
		`{"id":"1","d":{"x":1},"d":{"y":2},"a":1}`,
		`{"id":"1","d":{"x":1},"a":1}`,
		`{"id":"1","a":1,"d":{"x":1}}`,
		`{"id":"1","d":{"y":2},"d":{"x":1}}`,
		`{"id":"1","d":{"x":1},"d":{"x":1}}`,
		`{"id":"1","d":[1],"a":2,"a~/b":"s"}`,
		`{"id":"1","a~/b":"s","a":1,"d":{"x":1,"y":2}}`,
		`{}`,
	}
	diff := func(old, cur [][]byte) (del, set []string) {
		in := func(l [][]byte, k []byte) bool {
			return slices.ContainsFunc(l, func(e []byte) bool { return bytes.Equal(e, k) })
		}
		for _, k := range old {
			if !in(cur, k) {
				del = append(del, string(k))
			}
		}
		for _, k := range cur {
			if !in(old, k) {
				set = append(set, string(k))
			}
		}
		slices.Sort(del)
		slices.Sort(set)
		return slices.Compact(del), slices.Compact(set)
	}
	for _, a := range docs {
		for _, b := range docs {
			oldObj, _ := jsondoc.Parse([]byte(a))
			curObj, _ := jsondoc.Parse([]byte(b))
			old, _ := c.objectIndexEntries(oldObj, key)
			cur, _ := c.objectIndexEntries(curObj, key)
			if len(oldObj) > 0 && len(old) == 0 {
				t.Fatalf("%s: no index entries", a)
			}
			wantDel, wantSet := diff(old, cur)
			oldFields, curFields := changedFields(oldObj, curObj)
			old, _ = c.fieldIndexEntries(oldFields, oldObj, key)
			cur, _ = c.fieldIndexEntries(curFields, curObj, key)
			gotDel, gotSet := diff(old, cur)
			if !slices.Equal(gotDel, wantDel) || !slices.Equal(gotSet, wantSet) {
				t.Errorf("%s -> %s: %d deleted and %d set, listing every property %d and %d", a, b, len(gotDel), len(gotSet), len(wantDel), len(wantSet))
			}
		}
	}
}

// BenchmarkReplaceIndexEntries is the index entries a replace of the
// server benchmark's kind lists (cmd/orrery's benchDoc with n changed, the
// stored version with its system properties): every property's, or only
// those of the properties changedFields leaves; and changedFields alone.
func BenchmarkReplaceIndexEntries(b *testing.B) {
	c := &Container{rid: make([]byte, 8), index: indexpolicy.New(map[string]any{"indexingPolicy": map[string]any{"includedPaths": []any{map[string]any{"path": "/*"}}}})}
	key := append(append([]byte{'D'}, make([]byte, 8)...), "\x02p1\x00\x00r1"...)
	prev := []byte(benchDoc("r1", 1)[:len(benchDoc("r1", 1))-1] +
		`,"_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAABAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000001\"","_attachments":"attachments/","_ts":1767322000}`)
	cur, err := jsondoc.Parse([]byte(benchDoc("r1", 2)))
	if err != nil {
		b.Fatal(err)
	}
	cur = append(cur, jsondoc.Field{Name: "_ts", Value: json.RawMessage("1767322001")})
	b.Run("every-property", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			old, err := c.indexEntries(prev, key)
			if err != nil {
				b.Fatal(err)
			}
			now, err := c.objectIndexEntries(cur, key)
			if err != nil || len(old) != len(now) {
				b.Fatal(err, len(old), len(now))
			}
			slices.SortFunc(old, bytes.Compare)
			slices.SortFunc(now, bytes.Compare)
		}
	})
	// The pairing alone: which properties a replace changed.
	b.Run("changedFields", func(b *testing.B) {
		prevObj, err := jsondoc.Parse(prev)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if oldFields, curFields := changedFields(prevObj, cur); len(oldFields) != 7 || len(curFields) != 3 {
				b.Fatal(oldFields, curFields)
			}
		}
	})
	b.Run("changed-properties", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			prevObj, err := jsondoc.Parse(prev)
			if err != nil {
				b.Fatal(err)
			}
			oldFields, curFields := changedFields(prevObj, cur)
			old, err := c.fieldIndexEntries(oldFields, prevObj, key)
			if err != nil {
				b.Fatal(err)
			}
			now, err := c.fieldIndexEntries(curFields, cur, key)
			if err != nil || len(old) != 5 || len(now) != 5 {
				b.Fatal(err, len(old), len(now))
			}
			slices.SortFunc(old, bytes.Compare)
			slices.SortFunc(now, bytes.Compare)
		}
	})
}

// TestUniqueValueFollowsItsItemThroughReplacesAndDeletes: in a container
// with a unique key, an item keeps its value through a replace that
// changes another property (a second item cannot take it), frees it on a
// replace that changes it (the second item takes it then), and frees its
// new value when deleted: the replaced version's unique entries are read
// from the stored record, parsed once for them and for the index.
func TestUniqueValueFollowsItsItemThroughReplacesAndDeletes(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	createContainer(t, e, `{"id":"u","partitionKey":{"paths":["/pk"]},"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/name"]}]}}`)
	put := func(body string) error {
		_, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "u", Body: []byte(body)})
		return err
	}
	conflict := func(err error) bool {
		var e *Error
		return errors.As(err, &e) && e.Status == 409
	}
	steps := []struct {
		body     string
		conflict bool
	}{
		{`{"id":"a","pk":"p","name":"x","n":1}`, false},
		{`{"id":"a","pk":"p","name":"x","n":2}`, false},
		{`{"id":"b","pk":"p","name":"x"}`, true},
		{`{"id":"a","pk":"p","n":3,"name":"y"}`, false},
		{`{"id":"b","pk":"p","name":"x"}`, false},
		{`{"id":"b","pk":"p","name":"y"}`, true},
	}
	for _, s := range steps {
		if err := put(s.body); conflict(err) != s.conflict || err != nil && !conflict(err) {
			t.Fatalf("%s: %v, want a conflict: %v", s.body, err, s.conflict)
		}
	}
	if _, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "u", ID: "a", PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
		t.Fatal(err)
	}
	if err := put(`{"id":"b","pk":"p","name":"y"}`); err != nil {
		t.Fatalf("the deleted item's value is still held: %v", err)
	}
}

// TestRepeatsNameIsThePairwiseComparison: repeatsName, which compares
// only names whose mask bits meet, answers as comparing every pair of
// names does, on lists of names that share lengths, first and last bytes
// (the mask's collisions) and repeat or not.
func TestRepeatsNameIsThePairwiseComparison(t *testing.T) {
	pairwise := func(obj jsondoc.Object) bool {
		for i := range obj {
			for j := range i {
				if obj[i].Name == obj[j].Name {
					return true
				}
			}
		}
		return false
	}
	r := rand.New(rand.NewPCG(40, 1))
	alphabet := "ab_/~\\x\x00é"
	repeats := 0
	for range 20000 {
		obj := make(jsondoc.Object, r.IntN(maxDiffedFields+1))
		for i := range obj {
			name := make([]byte, r.IntN(5))
			for k := range name {
				name[k] = alphabet[r.IntN(len(alphabet))]
			}
			obj[i].Name = string(name)
		}
		want := pairwise(obj)
		if got := repeatsName(obj); got != want {
			t.Fatalf("%q: repeatsName %v, pairwise %v", obj, got, want)
		}
		if want {
			repeats++
		}
	}
	if repeats < 1000 || repeats > 19000 {
		t.Fatalf("%d of 20000 lists repeat a name: too few of one kind to tell", repeats)
	}
}
