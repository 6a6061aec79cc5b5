package query

// The spatial functions over GeoJSON values with the service's geography
// semantics (geodesy.go): a value that is not a GeoJSON Point, LineString,
// Polygon or MultiPolygon, or one that is not valid, makes them undefined,
// as an invalid geometry is undefined to the service's queries.

// spatialArg reads a valid geometry argument.
func spatialArg(a []value, i int) (*shape, bool) {
	g, why, ok := parseGeometry(a[i])
	if !ok || why != "" {
		return nil, false
	}
	return newShape(g), true
}

func init() {
	register("ST_DISTANCE", 2, 2, func(_ *evalCtx, a []value) value {
		x, ok1 := spatialArg(a, 0)
		y, ok2 := spatialArg(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return numResult(distance(x, y))
	})
	register("ST_WITHIN", 2, 2, func(_ *evalCtx, a []value) value {
		x, ok1 := spatialArg(a, 0)
		y, ok2 := spatialArg(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return boolV(within(x, y))
	})
	register("ST_INTERSECTS", 2, 2, func(_ *evalCtx, a []value) value {
		x, ok1 := spatialArg(a, 0)
		y, ok2 := spatialArg(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return boolV(intersects(x, y))
	})
	register("ST_AREA", 1, 1, func(_ *evalCtx, a []value) value {
		g, why, ok := parseGeometry(a[0])
		if !ok || why != "" {
			return undef
		}
		return numResult(area(g))
	})
	register("ST_ISVALID", 1, 1, func(_ *evalCtx, a []value) value {
		valid, _, ok := spatialValidity(a[0])
		if !ok {
			return undef
		}
		return boolV(valid)
	})
	register("ST_ISVALIDDETAILED", 1, 1, func(_ *evalCtx, a []value) value {
		valid, reason, ok := spatialValidity(a[0])
		if !ok {
			return undef
		}
		if valid {
			return objV(&object{keys: []string{"valid"}, vals: []value{trueValue}})
		}
		return objV(&object{keys: []string{"valid", "reason"}, vals: []value{falseVal, strV(reason)}})
	})
}

// spatialValidity says whether a value is a valid geometry and, if not,
// why; ok is false for a value that is not an object.
func spatialValidity(v value) (valid bool, reason string, ok bool) {
	o := v.object()
	if o == nil {
		return false, "", false
	}
	_, why, known := parseGeometry(v)
	switch {
	case !known:
		t := o.get("type")
		if t.k != kString {
			return false, "The GeoJSON object must have a type: Point, LineString, Polygon or MultiPolygon.", true
		}
		return false, "The GeoJSON type '" + t.str() + "' is not supported: it must be Point, LineString, Polygon or MultiPolygon.", true
	case why != "":
		return false, why, true
	}
	return true, "", true
}
