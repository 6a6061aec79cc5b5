package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
)

// fieldIndexEntriesAsBefore is fieldIndexEntries as it was before its
// entries were built in a write's scratch: nested objects parsed with
// jsondoc.Parse, a closure walking them, a chunk per call. The storage keys
// it lists are what the index holds; the write path must list the same.
func (c *Container) fieldIndexEntriesAsBefore(fields, whole jsondoc.Object, itemKey []byte) ([][]byte, error) {
	if c.index == nil || c.index.None {
		return nil, nil
	}
	obj := fields
	suffix := itemKey[1+len(c.rid):]
	out := make([][]byte, 0, len(obj)+4)
	var chunk []byte
	var walk func(obj jsondoc.Object, path []byte) error
	walk = func(obj jsondoc.Object, path []byte) error {
		for _, f := range obj {
			if len(path) == 0 && (unindexed(f.Name) || c.computedByName(f.Name) != nil) {
				continue
			}
			p := appendIndexName(append(path, '/'), f.Name)
			raw := f.Value
			if raw[0] == '{' {
				sub, err := jsondoc.Parse(raw)
				if err != nil {
					return err
				}
				if err := walk(sub, p); err != nil {
					return err
				}
			}
			if !c.index.All && !c.index.Indexes(string(p)) || c.index.All && string(p) == "/_etag" {
				continue
			}
			if need := 1 + len(c.rid) + binary.MaxVarintLen32 + len(p) + 2*maxIndexedString + 3 + len(suffix); cap(chunk)-len(chunk) < need {
				chunk = make([]byte, 0, max(need, 1024))
			}
			start := len(chunk)
			k, err := appendRawIndexValue(keys.AppendIndexPathPrefix(chunk, c.rid, p), raw)
			if err != nil {
				return err
			}
			chunk = append(k, suffix...)
			out = append(out, chunk[start:len(chunk):len(chunk)])
		}
		return nil
	}
	if err := walk(obj, make([]byte, 0, 64)); err != nil {
		return nil, err
	}
	out, err := c.appendComputedIndexEntries(whole, suffix, out)
	if err != nil {
		return nil, err
	}
	return c.appendSpatialIndexEntries(obj, suffix, out)
}

// randomIndexedDoc is a document of nested objects and arrays with names
// and strings the index escapes or decodes: '~' and '/', escapes, a NUL,
// non-ASCII, repeated names, spaces between tokens, long strings.
func randomIndexedDoc(r *rand.Rand, depth int) string {
	names := []string{"a", "b", "id", "_ts", "_etag", "_rid", "x~/y", `q\"q`, `\u00e9t\u00e9`, "été", "n", "nested", "loc", "cp", "a b", `t\/u`}
	scalars := []string{`1`, `-0`, `2.5e3`, `-17`, `true`, `false`, `null`, `""`, `"s"`, `"a\u0000b"`, `"\ud83d\ude00"`, `"été"`,
		`"` + strings.Repeat("long", 40) + `"`, `"` + strings.Repeat(`\n`, 60) + `"`, `[1,{"k":2}]`, `[]`, `{}`,
		`{"type":"Point","coordinates":[1.5,2.5]}`}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := 0, r.IntN(7); i < n; i++ {
		if i > 0 {
			b.WriteString([]string{",", " , ", ",\n"}[r.IntN(3)])
		}
		fmt.Fprintf(&b, `"%s"%s:`, names[r.IntN(len(names))], []string{"", " "}[r.IntN(2)])
		if depth < 3 && r.IntN(3) == 0 {
			b.WriteString(randomIndexedDoc(r, depth+1))
		} else {
			b.WriteString(scalars[r.IntN(len(scalars))])
		}
	}
	b.WriteString([]string{"}", " }"}[r.IntN(2)])
	return b.String()
}

// TestWriteIndexEntriesAreTheStorageKeysOfBefore: the index entries a
// write lists, built in its scratch with nested objects read in place, are
// the keys the former listing gave, byte for byte and in order, for random
// documents under policies that index every path, some paths, computed
// and spatial properties; and a scratch used for one document's entries
// leaves those of the next the same.
func TestWriteIndexEntriesAreTheStorageKeysOfBefore(t *testing.T) {
	key := append(append([]byte{'D'}, 1, 2, 3, 4, 5, 6, 7, 8), "\x02p1\x00\x00r1"...)
	var containers []*Container
	for _, policy := range []string{
		`{}`,
		`{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/\"_etag\"/?"}]}`,
		`{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/nested/*"}]}`,
		`{"includedPaths":[{"path":"/a/?"},{"path":"/nested/a/?"}],"excludedPaths":[{"path":"/*"}]}`,
		`{"includedPaths":[{"path":"/*"}],"spatialIndexes":[{"path":"/*","types":["Point"]}]}`,
	} {
		var ip map[string]any
		if err := json.Unmarshal([]byte(policy), &ip); err != nil {
			t.Fatal(err)
		}
		containers = append(containers, &Container{rid: []byte{1, 2, 3, 4, 5, 6, 7, 8}, index: indexpolicy.New(map[string]any{"indexingPolicy": ip})})
	}
	computed := &Container{rid: []byte{1, 2, 3, 4, 5, 6, 7, 8}, index: indexpolicy.New(map[string]any{"indexingPolicy": map[string]any{}})}
	cp, err := query.ParseComputedProperty("cp", "SELECT VALUE LOWER(c.id) FROM c")
	if err != nil {
		t.Fatal(err)
	}
	cp.Indexed = true
	computed.computed = []*query.ComputedProperty{cp}
	containers = append(containers, computed)
	r := rand.New(rand.NewPCG(37, 25))
	sc := new(writeScratch)
	checked := 0
	for range 3000 {
		doc := randomIndexedDoc(r, 0)
		if !json.Valid([]byte(doc)) {
			t.Fatalf("not JSON: %s", doc)
		}
		obj, err := jsondoc.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		fields := obj
		if len(obj) > 1 && r.IntN(2) == 0 {
			fields = obj[r.IntN(len(obj)):]
		}
		for _, c := range containers {
			want, err := c.fieldIndexEntriesAsBefore(fields, obj, key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.fieldIndexEntries(fields, obj, key)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("%s: entries\n%q\nbefore\n%q", doc, got, want)
			}
			// In a scratch that listed others first, as reindex lists a
			// replace's two versions.
			prior := len(sc.old)
			sc.old, err = c.appendFieldIndexEntries(sc, sc.old, fields, obj, key)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(sc.old[prior:], want, bytes.Equal) {
				t.Fatalf("%s: entries in a used scratch\n%q\nbefore\n%q", doc, sc.old[prior:], want)
			}
			checked += len(want)
		}
		if r.IntN(4) == 0 {
			sc.release()
			sc = writeScratchPool.Get().(*writeScratch)
		}
	}
	t.Logf("%d entries the same", checked)
}

// TestItemKeysOfAPartitionAreItsPrefixAndTheID: the item keys a partition
// builds, the first in the partition's own buffer, are its prefix (that of
// keys.ItemPartitionPrefix) and the id, and appending to one changes
// neither the prefix nor another key; short and long partition keys and ids.
func TestItemKeysOfAPartitionAreItsPrefixAndTheID(t *testing.T) {
	c := &Container{rid: []byte{1, 2, 3, 4, 5, 6, 7, 8}, pk: PartitionKeyDefinition{Paths: []string{"/pk"}, Kind: "Hash", Version: 2}}
	for _, pk := range []string{"p", strings.Repeat("long key ", 12)} {
		for _, ids := range [][]string{{"a", "bb"}, {strings.Repeat("x", 90), "c"}, {"c", strings.Repeat("y", 200)}} {
			p, err := c.partition(StringKey(pk))
			if err != nil {
				t.Fatal(err)
			}
			want := keys.ItemPartitionPrefix(c.rid, effectivePartitionKey(&c.pk, StringKey(pk)), StringKey(pk).Encode())
			if !bytes.Equal(p.prefix, want) {
				t.Fatalf("prefix %q, want %q", p.prefix, want)
			}
			k1 := p.itemKey(ids[0])
			k2 := p.itemKey(ids[1])
			_ = append(k1, "zz"...)
			_ = append(k2, "zz"...)
			if string(k1) != string(want)+ids[0] || string(k2) != string(want)+ids[1] || !bytes.Equal(p.prefix, want) {
				t.Fatalf("keys %q and %q of ids %q under prefix %q", k1, k2, ids, want)
			}
		}
	}
}

// TestIndexAfterConcurrentWritersIsAFreshRebuild: writers side by side in
// different partitions, whose writes build their keys in scratches of one
// pool, leave the index, items and feed as a rebuild from the items
// writes the index: no write's keys are built in a scratch another write
// still uses.
func TestIndexAfterConcurrentWritersIsAFreshRebuild(t *testing.T) {
	ctx := t.Context()
	e := openTestEngine(t, newTestStore(t))
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	scalars := []string{`1`, `-0`, `2.5e3`, `true`, `null`, `""`, `"a\u0000b"`, `"été"`, `"` + strings.Repeat("long", 40) + `"`,
		`[1,{"k":2}]`, `{}`, `{"type":"Point","coordinates":[1.5,2.5]}`, `{"k":{"j":"v"}}`}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 37))
			for i := range 150 {
				id := fmt.Sprint(r.IntN(12))
				pk := fmt.Sprintf("w%d", w)
				if i%10 == 9 {
					e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey(pk), HasPartitionKey: true})
					continue
				}
				v := func() string { return scalars[r.IntN(len(scalars))] }
				doc := fmt.Sprintf(`{"id":%q,"pk":%q,"w":%d,"i":%d,"a":%s,"d":{"x~/y":%s,"n":{"\u00e9":%s}},"b":%s}`, id, pk, w, i, v(), v(), v(), v())
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(doc)}); err != nil {
					errs <- fmt.Errorf("%s: %w", doc, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := keysUnder(t, e.store, keys.IndexPrefix(c.rid))
	if err := e.rebuilder.rebuildIndex(ctx, c); err != nil {
		t.Fatal(err)
	}
	if fresh := keysUnder(t, e.store, keys.IndexPrefix(c.rid)); !slices.Equal(got, fresh) {
		t.Errorf("the index after the concurrent writes (%d entries) differs from a fresh rebuild (%d)", len(got), len(fresh))
	}
}
