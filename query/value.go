package query

import (
	"math"
	"sort"
	"strings"
	"unsafe"
)

// kind is the JSON type of a value, with undefined as the zero kind. The
// constants are declared in Cosmos's cross-type sort order: undefined < null
// < boolean < number < string < array < object.
type kind uint8

const (
	kUndefined kind = iota
	kNull
	kBool
	kNumber
	kString
	kArray
	kObject
)

// value is the evaluator's representation of a JSON value or undefined.
// It is 32 bytes with a single pointer word: p points at the bytes of a
// string, the elements of an array or the *object of an object, and l is
// the string's or array's length. Keeping one pointer makes copies cheap
// for the garbage collector.
type value struct {
	k kind
	b bool
	n float64
	p unsafe.Pointer
	l int
}

// str returns a string value's text.
func (v value) str() string {
	if v.k != kString || v.l == 0 {
		return ""
	}
	return unsafe.String((*byte)(v.p), v.l)
}

// array returns an array value's elements; callers must not modify them.
func (v value) array() []value {
	if v.k != kArray || v.l == 0 {
		return nil
	}
	return unsafe.Slice((*value)(v.p), v.l)
}

// object returns an object value's properties.
func (v value) object() *object {
	if v.k != kObject {
		return nil
	}
	return (*object)(v.p)
}

// object is a JSON object that keeps the order of its properties.
type object struct {
	keys []string
	vals []value
	// raw, when set, is the document's own text, which appendJSON writes
	// instead of the members: the document was decoded only in part (just
	// the properties the query reads) and its text is exactly what
	// appendJSON would produce. Objects with raw set are never modified.
	raw string
}

var (
	undef     = value{}
	nullValue = value{k: kNull}
	trueValue = value{k: kBool, b: true}
	falseVal  = value{k: kBool}
)

func boolV(b bool) value   { return value{k: kBool, b: b} }
func numV(f float64) value { return value{k: kNumber, n: f} }
func strV(s string) value {
	return value{k: kString, p: unsafe.Pointer(unsafe.StringData(s)), l: len(s)}
}

func arrV(a []value) value {
	return value{k: kArray, p: unsafe.Pointer(unsafe.SliceData(a)), l: len(a)}
}

func objV(o *object) value    { return value{k: kObject, p: unsafe.Pointer(o)} }
func (v value) defined() bool { return v.k != kUndefined }
func (v value) isTrue() bool  { return v.k == kBool && v.b }

// get returns the property named key, or undefined.
func (o *object) get(key string) value {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i]
		}
	}
	return undef
}

// set replaces the property named key or appends it.
func (o *object) set(key string, v value) {
	for i, k := range o.keys {
		if k == key {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

// compareOrder is a total order over values used by ORDER BY, MIN/MAX and
// DISTINCT: first by type rank, then by value within the type.
func compareOrder(a, b value) int {
	if a.k != b.k {
		if a.k < b.k {
			return -1
		}
		return 1
	}
	switch a.k {
	case kBool:
		if a.b == b.b {
			return 0
		}
		if !a.b {
			return -1
		}
		return 1
	case kNumber:
		return cmpFloat(a.n, b.n)
	case kString:
		return strings.Compare(a.str(), b.str())
	case kArray:
		for i := 0; i < len(a.array()) && i < len(b.array()); i++ {
			if c := compareOrder(a.array()[i], b.array()[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(a.array()), len(b.array()))
	case kObject:
		ak, bk := sortedKeys(a.object()), sortedKeys(b.object())
		for i := 0; i < len(ak) && i < len(bk); i++ {
			if c := strings.Compare(ak[i], bk[i]); c != 0 {
				return c
			}
			if c := compareOrder(a.object().get(ak[i]), b.object().get(bk[i])); c != 0 {
				return c
			}
		}
		return cmpInt(len(ak), len(bk))
	}
	return 0
}

func sortedKeys(o *object) []string {
	ks := append([]string(nil), o.keys...)
	sort.Strings(ks)
	return ks
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// equalValues is deep JSON equality; object property order does not matter.
func equalValues(a, b value) bool {
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kUndefined, kNull:
		return true
	case kBool:
		return a.b == b.b
	case kNumber:
		return a.n == b.n
	case kString:
		return a.str() == b.str()
	case kArray:
		if len(a.array()) != len(b.array()) {
			return false
		}
		for i := range a.array() {
			if !equalValues(a.array()[i], b.array()[i]) {
				return false
			}
		}
		return true
	case kObject:
		if len(a.object().keys) != len(b.object().keys) {
			return false
		}
		for i, k := range a.object().keys {
			bv := b.object().get(k)
			if !bv.defined() || !equalValues(a.object().vals[i], bv) {
				return false
			}
		}
		return true
	}
	return false
}

// isInteger reports whether f is a whole number.
func isInteger(f float64) bool {
	return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f)
}
