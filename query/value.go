package query

import (
	"math"
	"sort"
	"strings"
)

// kind is the JSON type of a value, with undefined as the zero kind.
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
type value struct {
	k   kind
	b   bool
	n   float64
	s   string
	arr []value
	obj *object
}

// object is a JSON object that keeps the order of its properties.
type object struct {
	keys []string
	vals []value
}

var (
	undef     = value{}
	nullValue = value{k: kNull}
	trueValue = value{k: kBool, b: true}
	falseVal  = value{k: kBool}
)

func boolV(b bool) value      { return value{k: kBool, b: b} }
func numV(f float64) value    { return value{k: kNumber, n: f} }
func strV(s string) value     { return value{k: kString, s: s} }
func arrV(a []value) value    { return value{k: kArray, arr: a} }
func objV(o *object) value    { return value{k: kObject, obj: o} }
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

// typeRank orders kinds the way Cosmos orders values of different types in
// ORDER BY: undefined < null < boolean < number < string < array < object.
func typeRank(k kind) int { return int(k) }

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
		return strings.Compare(a.s, b.s)
	case kArray:
		for i := 0; i < len(a.arr) && i < len(b.arr); i++ {
			if c := compareOrder(a.arr[i], b.arr[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(a.arr), len(b.arr))
	case kObject:
		ak, bk := sortedKeys(a.obj), sortedKeys(b.obj)
		for i := 0; i < len(ak) && i < len(bk); i++ {
			if c := strings.Compare(ak[i], bk[i]); c != 0 {
				return c
			}
			if c := compareOrder(a.obj.get(ak[i]), b.obj.get(bk[i])); c != 0 {
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
		return a.s == b.s
	case kArray:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !equalValues(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	case kObject:
		if len(a.obj.keys) != len(b.obj.keys) {
			return false
		}
		for i, k := range a.obj.keys {
			bv := b.obj.get(k)
			if !bv.defined() || !equalValues(a.obj.vals[i], bv) {
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
