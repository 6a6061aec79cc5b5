package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/geocell"
	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// The secondary index keeps, for every scalar property of every item, a key
//
//	I<coll rid 8><path len uvarint><path><value><item key suffix>
//
// where the value is encoded so that byte order is Cosmos's order across
// types (null < false < true < numbers < strings), and the suffix is the item's
// key without its 'D'<coll rid> prefix. Entries are written in the same storage
// batch as the item, so the index is never behind.
//
// Strings longer than maxIndexedString bytes are indexed by their first
// maxIndexedString bytes: an index is a pre-selection (the query is always
// evaluated in full on the candidates it yields), so a shared prefix only
// makes more candidates, while a kilobyte of text would be written, and
// compacted, a second time in every item's index.

// maxIndexedString is how many bytes of a string value an index entry keeps.
const maxIndexedString = 100

// indexFormat is the version of the index layout; an engine opened on a store
// written with another rebuilds every container's index (see rebuild.go).
// Version 1 kept whole strings under the expiry index's prefix 'X'; version
// 2 had no creation order keys (order.go); version 3 no spatial entries
// (appendSpatialIndexEntries).
const indexFormat = 4

// Value type markers, in Cosmos's cross-type order.
const (
	ixNull   byte = 0x01
	ixFalse  byte = 0x02
	ixTrue   byte = 0x03
	ixNumber byte = 0x05
	ixString byte = 0x08
	ixArray  byte = 0x0A // arrays and objects are indexed by type only, so an
	ixObject byte = 0x0B // ordered scan knows where they sort
)

// appendIndexValue appends the order-preserving encoding of a scalar; ok is
// false for objects and arrays, which are not indexed as values.
func appendIndexValue(k []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(k, ixNull), true
	case bool:
		if x {
			return append(k, ixTrue), true
		}
		return append(k, ixFalse), true
	case float64:
		return appendIndexNumber(k, x), true
	case string:
		return appendIndexString(append(k, ixString), x, true), true
	}
	return k, false
}

// indexKeyOfJSON is base followed by the index encoding of the JSON value
// raw decodes to (json.Unmarshal into any, then appendIndexValue), ok false
// when it does not decode or is not indexable. null, true, false, a number
// as JSON writes it and a string of printable ASCII without escapes
// (jsondoc.IsPlainString) are encoded from their bytes; anything else is
// decoded.
func indexKeyOfJSON(base []byte, raw []byte) ([]byte, bool) {
	// Twice the key's room: prefixRange puts its upper bound in the rest.
	k := make([]byte, len(base), 2*(len(base)+len(raw)+9))
	copy(k, base)
	switch {
	case string(raw) == "null":
		return append(k, ixNull), true
	case string(raw) == "true":
		return append(k, ixTrue), true
	case string(raw) == "false":
		return append(k, ixFalse), true
	case jsondoc.NumberEnd(raw, 0) == len(raw):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, false // out of range: Unmarshal's error too
		}
		return appendIndexNumber(k, f), true
	case jsondoc.IsPlainString(raw): // others (escapes, non-ASCII) decode to the same bytes
		return appendIndexString(append(k, ixString), raw[1:len(raw)-1], true), true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return appendIndexValue(k, v)
}

func appendIndexNumber(k []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 sorts and matches as 0
	}
	bits := math.Float64bits(f)
	if bits>>63 == 0 {
		bits |= 1 << 63
	} else {
		bits = ^bits
	}
	return binary.BigEndian.AppendUint64(append(k, ixNumber), bits)
}

// appendIndexString escapes 0x00 as 0x00 0xFF and, when terminated, ends the
// string with 0x00 0x01, so shorter strings sort first and a prefix of the
// unterminated form covers every string that starts with it. A string longer
// than maxIndexedString is cut there and, when terminated, ends with 0x00
// 0x02 instead: after every string it is a prefix of, and equal to every
// other long string with the same first bytes (see truncatedIndexValue).
func appendIndexString[S string | []byte](k []byte, s S, terminated bool) []byte {
	end := []byte{0, 1}
	if len(s) > maxIndexedString {
		s, end = s[:maxIndexedString], []byte{0, 2}
	}
	// The bytes between zero bytes are appended at once: most strings
	// hold none.
	for len(s) > 0 {
		z := indexZero(s)
		if z < 0 {
			k = append(k, s...)
			break
		}
		k = append(append(k, s[:z]...), 0, 0xFF)
		s = s[z+1:]
	}
	if terminated {
		k = append(k, end...)
	}
	return k
}

// indexZero is the index of s's first zero byte, or -1.
func indexZero[S string | []byte](s S) int {
	switch s := any(s).(type) {
	case string:
		return strings.IndexByte(s, 0)
	case []byte:
		return bytes.IndexByte(s, 0)
	}
	panic("unreachable")
}

// truncatedIndexValue reports whether an encoded value is a string cut to
// maxIndexedString bytes: it stands for every string with those first bytes.
func truncatedIndexValue(v []byte) bool {
	return len(v) > 2 && v[0] == ixString && v[len(v)-2] == 0 && v[len(v)-1] == 2
}

// unindexed reports whether name is a system property no query filters
// on: _rid, _self, _etag or _attachments (a switch, not a map: every
// property of every write is asked).
func unindexed(name string) bool {
	switch name {
	case "_rid", "_self", "_etag", "_attachments":
		return true
	}
	return false
}

// indexEntries lists the index keys of an item: one per indexed scalar
// property reachable through objects, and a type-only entry for each array
// and object. It walks the stored JSON without decoding it into maps: the
// write path runs it for every version written and replaced.
func (c *Container) indexEntries(doc []byte, itemKey []byte) ([][]byte, error) {
	if c.index == nil || c.index.None {
		return nil, nil
	}
	obj, err := jsondoc.Parse(doc)
	if err != nil {
		return nil, err
	}
	return c.objectIndexEntries(obj, itemKey)
}

// objectIndexEntries is indexEntries of a parsed document.
func (c *Container) objectIndexEntries(obj jsondoc.Object, itemKey []byte) ([][]byte, error) {
	return c.fieldIndexEntries(obj, obj, itemKey)
}

// fieldIndexEntries lists the index entries of some of a document's
// top-level properties, fields, and those of its computed properties,
// evaluated over the whole document, whole. A property's entries are a
// function of its name and its bytes alone (their paths begin with its
// name), which lets a replace leave out the properties it did not change
// (changedFields).
func (c *Container) fieldIndexEntries(fields, whole jsondoc.Object, itemKey []byte) ([][]byte, error) {
	if c.index == nil || c.index.None {
		return nil, nil
	}
	var sc writeScratch
	return c.appendFieldIndexEntries(&sc, make([][]byte, 0, len(fields)+4), fields, whole, itemKey)
}

// writeScratch is the memory of one item write: its index entries are
// built in it, with the other keys and lists the write is done with once
// its batch holds them. The index entries are built so:
// the keys are cut from chunk, one allocation for many, and the paths
// written into path. A write lists the entries of both its versions in one
// scratch; the storage batch copies the keys it is given, so that the
// scratch serves the next write once these are set and deleted
// (writeScratchPool).
type writeScratch struct {
	// chunk is where the next key starts: each is capped at its end, so
	// appending to one never writes into the next, and a chunk too short
	// for a key is left to the keys cut from it for a new one.
	chunk []byte
	// path: a nested object's paths are appended past its parent's,
	// which the parent reads only up to its length.
	path []byte
	// old, cur and fields are reindex's lists, kept for the next write.
	old, cur [][]byte
	fields   jsondoc.Object
	// prev is the array of the replaced version's parse (txn.parsePrev),
	// doc that of the written document with its _ts, sys the system
	// properties' values (txn.put) and keys the feed, RID and order keys.
	prev, doc jsondoc.Object
	sys, keys []byte
}

// writeScratchPool holds the scratch of writes done: one in use per write
// in flight.
var writeScratchPool = sync.Pool{New: func() any { return new(writeScratch) }}

// release gives sc back to writeScratchPool, forgetting the keys and
// documents it points to; a scratch grown past what a usual write needs is
// left to the collector.
func (sc *writeScratch) release() {
	if cap(sc.chunk) > 16<<10 || cap(sc.old) > 1024 || cap(sc.cur) > 1024 || cap(sc.fields) > 1024 ||
		cap(sc.prev) > 1024 || cap(sc.doc) > 1024 || cap(sc.sys) > 1024 || cap(sc.keys) > 1024 {
		return
	}
	clear(sc.old[:cap(sc.old)])
	clear(sc.cur[:cap(sc.cur)])
	clear(sc.fields[:cap(sc.fields)])
	clear(sc.prev[:cap(sc.prev)])
	clear(sc.doc[:cap(sc.doc)])
	sc.chunk, sc.sys, sc.keys = sc.chunk[:0], sc.sys[:0], sc.keys[:0]
	sc.old, sc.cur, sc.fields, sc.prev, sc.doc = sc.old[:0], sc.cur[:0], sc.fields[:0], sc.prev[:0], sc.doc[:0]
	writeScratchPool.Put(sc)
}

// appendFieldIndexEntries is fieldIndexEntries appending to out, the keys
// cut from sc.
func (c *Container) appendFieldIndexEntries(sc *writeScratch, out [][]byte, fields, whole jsondoc.Object, itemKey []byte) ([][]byte, error) {
	if c.index == nil || c.index.None {
		return out, nil
	}
	w := indexWalk{c: c, sc: sc, suffix: itemKey[1+len(c.rid):], out: out}
	if cap(sc.path) == 0 {
		sc.path = make([]byte, 0, 64)
	}
	for _, f := range fields {
		if unindexed(f.Name) || c.computedByName(f.Name) != nil {
			continue // a computed property's name hides a persisted one
		}
		if err := w.value(appendIndexName(append(sc.path[:0], '/'), f.Name), f.Value); err != nil {
			return nil, err
		}
	}
	out, err := c.appendComputedIndexEntries(whole, w.suffix, w.out)
	if err != nil {
		return nil, err
	}
	return c.appendSpatialIndexEntries(fields, w.suffix, out)
}

// indexWalk lists the entries of a document's values into out.
type indexWalk struct {
	c      *Container
	sc     *writeScratch
	suffix []byte
	out    [][]byte
}

// value lists the entries of the value raw at path p: those of its
// properties first when it is an object, then its own.
func (w *indexWalk) value(p []byte, raw json.RawMessage) error {
	c := w.c
	if raw[0] == '{' {
		// The object's properties are read where they are, as
		// jsondoc.Parse would list them, without building it.
		for i := 1; ; {
			name, v, next, ok, err := jsondoc.NextField(raw, i)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if err := w.value(appendIndexName(append(p, '/'), name), v); err != nil {
				return err
			}
			i = next
		}
	}
	if !c.index.All && !c.index.Indexes(string(p)) || c.index.All && string(p) == "/_etag" {
		return nil
	}
	// The longest entry: the prefix, a string value of maxIndexedString
	// bytes all escaped and its end, the suffix.
	chunk := w.sc.chunk
	if need := 1 + len(c.rid) + binary.MaxVarintLen32 + len(p) + 2*maxIndexedString + 3 + len(w.suffix); cap(chunk)-len(chunk) < need {
		chunk = make([]byte, 0, max(need, 1024))
	}
	start := len(chunk)
	k, err := appendRawIndexValue(keys.AppendIndexPathPrefix(chunk, c.rid, p), raw)
	if err != nil {
		return err
	}
	chunk = append(k, w.suffix...)
	w.out = append(w.out, chunk[start:len(chunk):len(chunk)])
	w.sc.chunk = chunk
	return nil
}

// maxDiffedFields bounds the documents whose properties changedFields
// pairs (a quadratic search, cheap for the few properties of most items);
// a larger document is reindexed whole.
const maxDiffedFields = 64

// changedFields returns the top-level properties of old and of cur left
// once those a replace kept are taken out: a property of the same name
// and the same bytes in both. Such a property has the same index entries
// in both versions (fieldIndexEntries), so that the write neither deletes
// nor sets them, and need not list them either. A document that repeats
// a name (a record stored before names were checked) is listed whole: the
// entries of one of its values may be another's too (an object's type
// entry). Both results share one new array; old and cur are left as they
// are.
func changedFields(old, cur jsondoc.Object) (jsondoc.Object, jsondoc.Object) {
	old, cur, _ = changedFieldsIn(nil, old, cur)
	return old, cur
}

// changedFieldsIn is changedFields listing the properties in buf's array
// when it has room, returned with what it holds for the next call.
func changedFieldsIn(buf, old, cur jsondoc.Object) (jsondoc.Object, jsondoc.Object, jsondoc.Object) {
	if len(old) > maxDiffedFields || len(cur) > maxDiffedFields || repeatsName(old) || repeatsName(cur) {
		return old, cur, buf
	}
	var keptOld, keptCur [maxDiffedFields]bool
	kept := 0
	for j, f := range cur {
		i := j
		if i >= len(old) || old[i].Name != f.Name {
			if i = fieldIndex(old, f.Name); i < 0 {
				continue
			}
		}
		if bytes.Equal(old[i].Value, f.Value) {
			keptOld[i], keptCur[j] = true, true
			kept++
		}
	}
	if kept == 0 {
		return old, cur, buf
	}
	both := buf[:0]
	if n := len(old) + len(cur) - 2*kept; cap(both) < n {
		both = make(jsondoc.Object, 0, n)
	}
	for i, f := range old {
		if !keptOld[i] {
			both = append(both, f)
		}
	}
	n := len(both)
	for j, f := range cur {
		if !keptCur[j] {
			both = append(both, f)
		}
	}
	return both[:n:n], both[n:], both[:0]
}

// repeatsName reports whether two properties of obj have one name. A
// name is compared with the earlier ones only when an earlier name has
// its bit of a 64-bit mask (nameBit): most documents' names all differ
// there, and are told apart in one pass, not by comparing every pair
// (every replace asks of both its versions).
func repeatsName(obj jsondoc.Object) bool {
	var seen uint64
	for i, f := range obj {
		bit := nameBit(f.Name)
		if seen&bit != 0 {
			for _, g := range obj[:i] {
				if g.Name == f.Name {
					return true
				}
			}
		}
		seen |= bit
	}
	return false
}

// nameBit is name's bit for repeatsName: one of 64, by its length and its
// first and last bytes.
func nameBit(name string) uint64 {
	if name == "" {
		return 1
	}
	return 1 << ((uint(len(name)) ^ uint(name[len(name)-1])<<2 ^ uint(name[0])) & 63)
}

// fieldIndex is the index of the first property of obj named name; -1
// if none.
func fieldIndex(obj jsondoc.Object, name string) int {
	for i := range obj {
		if obj[i].Name == name {
			return i
		}
	}
	return -1
}

// appendIndexName appends a property name as a path segment of the index:
// '~' and '/' escaped as in JSON pointers (see indexPath).
func appendIndexName[S ~string | ~[]byte](b []byte, name S) []byte {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, name[i])
		}
	}
	return b
}

// appendRawIndexValue appends the index encoding of a raw JSON value.
func appendRawIndexValue(k []byte, raw json.RawMessage) ([]byte, error) {
	switch raw[0] {
	case '{':
		return append(k, ixObject), nil
	case '[':
		return append(k, ixArray), nil
	case 'n':
		return append(k, ixNull), nil
	case 't':
		return append(k, ixTrue), nil
	case 'f':
		return append(k, ixFalse), nil
	case '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return appendIndexString(append(k, ixString), []byte(raw[1:len(raw)-1]), true), nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return appendIndexString(append(k, ixString), s, true), nil
	}
	if f, ok := smallInteger(raw); ok {
		return appendIndexNumber(k, f), nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, err
	}
	return appendIndexNumber(k, f), nil
}

// smallInteger reads a JSON number that is an integer of at most 15
// digits, which a double holds exactly: the value strconv.ParseFloat
// reads, without its general parse. ok is false for any other number.
func smallInteger(raw []byte) (float64, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -float64(n), true
	}
	return float64(n), true
}

// keyRange is a half-open range of storage keys.
type keyRange struct{ lower, upper []byte }

// prefixRange is the range of the keys that start with k: {k,
// storage.PrefixEnd(k)}, the upper bound written in k's spare capacity
// when it fits there (k's own capacity then ends at its length).
func prefixRange(k []byte) keyRange {
	if cap(k)-len(k) < len(k) {
		return keyRange{k, storage.PrefixEnd(k)}
	}
	end := storage.AppendPrefixEnd(k[len(k):len(k)], k)
	if len(end) == 0 {
		return keyRange{k[:len(k):len(k)], nil}
	}
	return keyRange{k[:len(k):len(k)], end[:len(end):len(end)]}
}

// indexRanges returns the index key ranges that hold the items matching a
// filter on path and the length of the path's index key prefix (an
// indexSource's base), or ok false when the index cannot serve the filter.
func (c *Container) indexRanges(path []string, op query.FilterOp, values []json.RawMessage) ([]keyRange, int, bool) {
	p := indexpolicy.Path(path)
	if c.index == nil || !c.index.Indexes(p) || len(path) == 0 {
		return nil, 0, false
	}
	base := keys.IndexPathPrefix(c.rid, p)
	ranges, ok := c.indexRangesUnder(base, op, values)
	return ranges, len(base), ok
}

// indexRangesUnder is indexRanges under the path's index key prefix base.
func (c *Container) indexRangesUnder(base []byte, op query.FilterOp, values []json.RawMessage) ([]keyRange, bool) {
	enc := func(raw json.RawMessage) ([]byte, bool) {
		return indexKeyOfJSON(base, raw)
	}
	// typeStart and typeEnd bound every value of the same type as the one
	// encoded in k (false and true are one type).
	typeStart := func(k []byte) []byte {
		t := append([]byte(nil), k[:len(base)+1]...)
		if t[len(base)] == ixTrue {
			t[len(base)] = ixFalse
		}
		return t
	}
	typeEnd := func(k []byte) []byte {
		t := append([]byte(nil), k[:len(base)+1]...)
		if t[len(base)] == ixFalse {
			t[len(base)] = ixTrue
		}
		return storage.PrefixEnd(t)
	}
	switch op {
	case query.FilterEq, query.FilterIn:
		var out []keyRange
		var seen map[string]bool // one value needs none
		if len(values) > 1 {
			seen = map[string]bool{}
		}
		for _, raw := range values {
			k, ok := enc(raw)
			if !ok {
				return nil, false
			}
			if seen == nil {
				out = append(out, prefixRange(k))
			} else if !seen[string(k)] {
				seen[string(k)] = true
				out = append(out, prefixRange(k))
			}
		}
		// In key order, so a continuation inside one range resumes after the
		// ranges before it.
		slices.SortFunc(out, func(a, b keyRange) int { return bytes.Compare(a.lower, b.lower) })
		return out, true
	case query.FilterLt, query.FilterLe, query.FilterGt, query.FilterGe:
		k, ok := enc(values[0])
		if !ok {
			return nil, false
		}
		// A cut string's entries hold values on both sides of it.
		cut := truncatedIndexValue(k[len(base):])
		// Comparisons across types are undefined: only the value's own type.
		switch op {
		case query.FilterLt:
			if cut {
				return []keyRange{{typeStart(k), storage.PrefixEnd(k)}}, true
			}
			return []keyRange{{typeStart(k), k}}, true
		case query.FilterLe:
			return []keyRange{{typeStart(k), storage.PrefixEnd(k)}}, true
		case query.FilterGt:
			if cut {
				return []keyRange{{k, typeEnd(k)}}, true
			}
			return []keyRange{{storage.PrefixEnd(k), typeEnd(k)}}, true
		default:
			return []keyRange{{k, typeEnd(k)}}, true
		}
	case query.FilterBetween:
		lo, ok1 := enc(values[0])
		hi, ok2 := enc(values[1])
		if !ok1 || !ok2 || !bytes.Equal(typeStart(lo), typeStart(hi)) {
			return nil, false
		}
		return []keyRange{{lo, storage.PrefixEnd(hi)}}, true
	case query.FilterStartsWith:
		var s string
		if json.Unmarshal(values[0], &s) != nil {
			return nil, false
		}
		k := appendIndexString(append(append([]byte(nil), base...), ixString), s, false)
		return []keyRange{{k, storage.PrefixEnd(k)}}, true
	}
	return nil, false
}

// indexValueLen is the length of the encoded value at the start of b.
func indexValueLen(b []byte) int {
	switch b[0] {
	case ixNumber:
		return 9
	case ixString:
		for i := 1; i+1 < len(b); i++ {
			if b[i] == 0 {
				if b[i+1] == 1 || b[i+1] == 2 {
					return i + 2
				}
				i++ // an escaped 0x00
			}
		}
		return len(b)
	}
	return 1
}

// indexedItemKey returns the storage key of the item an index entry points
// to; base is the entry's path prefix.
func (c *Container) indexedItemKey(entry []byte, base int) []byte {
	rest := entry[base:]
	suffix := rest[indexValueLen(rest):]
	return keys.ItemKeyFromSuffix(c.rid, suffix)
}

// chooseIndex picks the most selective filter of a plan the index can serve:
// equality, then IN, then STARTSWITH, then ranges.
func (c *Container) chooseIndex(plan *query.Plan) (*indexSource, bool) {
	if c.indexRetired.Load() {
		return nil, false
	}
	rank := map[query.FilterOp]int{query.FilterEq: 0, query.FilterIn: 1, query.FilterStartsWith: 2,
		query.FilterBetween: 3, query.FilterLt: 4, query.FilterLe: 4, query.FilterGt: 4, query.FilterGe: 4}
	var best *indexSource
	bestRank := 99
	for i, f := range plan.Filters {
		r, known := rank[f.Op]
		if !known || r >= bestRank {
			continue
		}
		if ranges, base, ok := c.indexRanges(f.Path, f.Op, f.Values); ok {
			// The filter itself (read only), not a copy of it.
			best = &indexSource{ranges: ranges, base: base, filters: plan.Filters[i : i+1 : i+1]}
			bestRank = r
		}
	}
	return best, best != nil
}

// indexSource is where a query's candidates come from when an index serves it.
type indexSource struct {
	ranges  []keyRange
	base    int  // length of the path prefix of every entry
	reverse bool // walk the ranges from the end
	// filters are the plan's filters the entries serve (index metrics).
	filters []query.Filter
}

// orderIndex returns the index entries that list, in ORDER BY order, the
// items a top-N query on one indexed ORDER BY path can draw from. complete
// reports whether those entries hold every item the query can return; when
// false (descending with no filter on the path), items without the property
// sort after them and may be needed.
func (c *Container) orderIndex(plan *query.Plan) (ix *indexSource, complete bool, ok bool) {
	if len(plan.OrderBy) != 1 || plan.OrderBy[0].Path == nil || plan.Aggregates || plan.GroupBy || plan.Distinct ||
		(plan.Top < 0 && plan.Limit < 0) {
		return nil, false, false
	}
	key := plan.OrderBy[0]
	p := indexpolicy.Path(key.Path)
	if c.index == nil || c.indexRetired.Load() || !c.index.Indexes(p) || len(key.Path) == 0 {
		return nil, false, false
	}
	base := keys.IndexPathPrefix(c.rid, p)
	for _, f := range plan.Filters {
		if slices.Equal(f.Path, key.Path) {
			if ranges, _, ok := c.indexRanges(f.Path, f.Op, f.Values); ok {
				// The filter implies the property is defined.
				return &indexSource{ranges: ranges, base: len(base), reverse: key.Descending, filters: []query.Filter{f}}, true, true
			}
		}
	}
	if !key.Descending {
		// Items without the property sort first: the index cannot list them.
		return nil, false, false
	}
	all := []keyRange{{base, storage.PrefixEnd(base)}}
	return &indexSource{ranges: all, base: len(base), reverse: true}, false, true
}

// appendComputedIndexEntries adds the index entries of the indexed
// computed properties of obj to out.
func (c *Container) appendComputedIndexEntries(obj jsondoc.Object, suffix []byte, out [][]byte) ([][]byte, error) {
	var doc []byte
	for _, cp := range c.computed {
		if !cp.Indexed {
			continue
		}
		if doc == nil {
			doc = obj.Encode()
		}
		v, ok, err := cp.Evaluate(doc)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		k, err := appendRawIndexValue(keys.IndexPathPrefix(c.rid, "/"+escapeIndexName(cp.Name)), v)
		if err != nil {
			return nil, err
		}
		out = append(out, append(k, suffix...))
	}
	return out, nil
}

func escapeIndexName(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// The spatial index's entries (their layout and queries: spatial.go).

// spatialTerms returns the cell of a raw JSON geometry: the smallest that
// holds its box. It is nil when the value is not a valid geometry (the
// service does not index those either).
func spatialTerms(raw json.RawMessage) []geocell.ID {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	b, ok := query.GeoBounds(raw)
	if !ok {
		return nil
	}
	return geocell.Cover(geocell.Box(b), 1)
}

// appendSpatialEntry appends a spatial index entry.
func appendSpatialEntry(k, prefix []byte, cell geocell.ID, suffix []byte) []byte {
	k = append(k, prefix...)
	k = append(k, ixNumber)
	k = binary.BigEndian.AppendUint64(k, uint64(cell))
	return append(k, suffix...)
}

// appendSpatialIndexEntries appends the spatial index entries of a parsed
// document.
func (c *Container) appendSpatialIndexEntries(obj jsondoc.Object, suffix []byte, out [][]byte) ([][]byte, error) {
	// A Geometry container's entries are written too (its queries do not
	// read them), so that a replace back to Geography finds them current.
	if c.index == nil || c.index.Spatial == nil {
		return out, nil
	}
	var walk func(raw json.RawMessage, path string, depth int) error
	walk = func(raw json.RawMessage, path string, depth int) error {
		if len(raw) == 0 || raw[0] != '{' {
			return nil
		}
		if c.index.Spatial.Covers(path) {
			prefix := keys.SpatialIndexPathPrefix(c.rid, path)
			for _, cell := range spatialTerms(raw) {
				out = append(out, appendSpatialEntry(nil, prefix, cell, suffix))
			}
		}
		if depth >= 8 {
			return nil
		}
		sub, err := jsondoc.Parse(raw)
		if err != nil {
			return err
		}
		for _, f := range sub {
			if !c.spatialUnder(path + "/" + string(appendIndexName(nil, f.Name))) {
				continue
			}
			if err := walk(f.Value, path+"/"+string(appendIndexName(nil, f.Name)), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range obj {
		p := "/" + string(appendIndexName(nil, f.Name))
		if unindexed(f.Name) || !c.spatialUnder(p) {
			continue
		}
		if err := walk(f.Value, p, 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// spatialUnder reports whether a spatial index pattern covers path or a
// path below it.
func (c *Container) spatialUnder(path string) bool {
	for _, pat := range c.index.Spatial.Paths {
		base := strings.TrimSuffix(strings.TrimSuffix(pat, "/?"), "/*")
		if base == "" || base == path || strings.HasPrefix(base, path+"/") || strings.HasPrefix(path, base+"/") {
			return true
		}
	}
	return false
}
