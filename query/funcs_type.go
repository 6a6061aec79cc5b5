package query

import "math"

func init() {
	typeCheck := func(name string, pred func(v value) bool) {
		register(name, 1, 1, func(_ *evalCtx, a []value) value { return boolV(pred(a[0])) })
	}
	typeCheck("IS_ARRAY", func(v value) bool { return v.k == kArray })
	typeCheck("IS_BOOL", func(v value) bool { return v.k == kBool })
	typeCheck("IS_DEFINED", func(v value) bool { return v.defined() })
	typeCheck("IS_NULL", func(v value) bool { return v.k == kNull })
	typeCheck("IS_NUMBER", func(v value) bool { return v.k == kNumber })
	typeCheck("IS_OBJECT", func(v value) bool { return v.k == kObject })
	typeCheck("IS_STRING", func(v value) bool { return v.k == kString })
	typeCheck("IS_PRIMITIVE", func(v value) bool {
		return v.k == kNull || v.k == kBool || v.k == kNumber || v.k == kString
	})
	typeCheck("IS_FINITE_NUMBER", func(v value) bool {
		return v.k == kNumber && !math.IsInf(v.n, 0) && !math.IsNaN(v.n)
	})
	typeCheck("IS_INTEGER", func(v value) bool {
		return v.k == kNumber && isInteger(v.n) && math.Abs(v.n) <= 1<<63
	})
	register("OBJECTTOARRAY", 1, 3, func(_ *evalCtx, a []value) value {
		if a[0].k != kObject {
			return undef
		}
		kName, vName := "k", "v"
		if len(a) > 1 {
			var ok bool
			if kName, ok = argStr(a, 1); !ok {
				return undef
			}
		}
		if len(a) > 2 {
			var ok bool
			if vName, ok = argStr(a, 2); !ok {
				return undef
			}
		}
		o := a[0].object()
		out := make([]value, 0, len(o.keys))
		for i, k := range o.keys {
			if !o.vals[i].defined() {
				continue
			}
			out = append(out, objV(&object{keys: []string{kName, vName}, vals: []value{strV(k), o.vals[i]}}))
		}
		return arrV(out)
	})
}
