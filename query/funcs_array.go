package query

func init() {
	register("ARRAY_CONCAT", 2, -1, func(_ *evalCtx, a []value) value {
		out := []value{}
		for _, v := range a {
			if v.k != kArray {
				return undef
			}
			out = append(out, v.array()...)
		}
		return arrV(out)
	})
	register("ARRAY_CONTAINS", 2, 3, func(_ *evalCtx, a []value) value {
		partial, ok := argOptBool(a, 2)
		if a[0].k != kArray || !ok {
			return undef
		}
		for _, el := range a[0].array() {
			if equalValues(el, a[1]) || (partial && partialMatch(el, a[1])) {
				return trueValue
			}
		}
		return falseVal
	})
	register("ARRAY_CONTAINS_ANY", 2, -1, func(_ *evalCtx, a []value) value {
		if a[0].k != kArray {
			return undef
		}
		for _, want := range a[1:] {
			if arrayHas(a[0].array(), want) {
				return trueValue
			}
		}
		return falseVal
	})
	register("ARRAY_CONTAINS_ALL", 2, -1, func(_ *evalCtx, a []value) value {
		if a[0].k != kArray {
			return undef
		}
		for _, want := range a[1:] {
			if !arrayHas(a[0].array(), want) {
				return falseVal
			}
		}
		return trueValue
	})
	register("ARRAY_LENGTH", 1, 1, func(_ *evalCtx, a []value) value {
		if a[0].k != kArray {
			return undef
		}
		return numV(float64(len(a[0].array())))
	})
	register("ARRAY_SLICE", 2, 3, func(_ *evalCtx, a []value) value {
		start, ok := argInt(a, 1)
		if a[0].k != kArray || !ok {
			return undef
		}
		arr := a[0].array()
		n := int64(len(arr))
		if start < 0 {
			start = max(n+start, 0)
		}
		start = min(start, n)
		end := n
		if len(a) > 2 {
			l, ok := argInt(a, 2)
			if !ok {
				return undef
			}
			if l < 0 {
				end = max(n+l, start)
			} else {
				end = min(start+l, n)
			}
		}
		if end < start {
			end = start
		}
		return arrV(append([]value{}, arr[start:end]...))
	})
	register("SETINTERSECT", 2, 2, func(_ *evalCtx, a []value) value {
		if a[0].k != kArray || a[1].k != kArray {
			return undef
		}
		out := []value{}
		for _, el := range a[0].array() {
			if arrayHas(a[1].array(), el) && !arrayHas(out, el) {
				out = append(out, el)
			}
		}
		return arrV(out)
	})
	register("SETUNION", 2, 2, func(_ *evalCtx, a []value) value {
		if a[0].k != kArray || a[1].k != kArray {
			return undef
		}
		out := []value{}
		for _, el := range append(append([]value{}, a[0].array()...), a[1].array()...) {
			if !arrayHas(out, el) {
				out = append(out, el)
			}
		}
		return arrV(out)
	})
}

func arrayHas(arr []value, v value) bool {
	for _, el := range arr {
		if equalValues(el, v) {
			return true
		}
	}
	return false
}

// partialMatch reports whether object el contains every property of want
// (recursively), the partial match of ARRAY_CONTAINS.
func partialMatch(el, want value) bool {
	if el.k != kObject || want.k != kObject {
		return false
	}
	for i, k := range want.object().keys {
		got := el.object().get(k)
		w := want.object().vals[i]
		if w.k == kObject {
			if !partialMatch(got, w) {
				return false
			}
			continue
		}
		if !equalValues(got, w) {
			return false
		}
	}
	return true
}
