package query

import "math"

// The spatial functions over GeoJSON values with the service's geography
// semantics (geodesy.go): a value that is not a GeoJSON Point, LineString,
// Polygon or MultiPolygon, or one that is not valid, makes them undefined,
// as an invalid geometry is undefined to the service's queries.

// maxCachedShapes and maxCachedPoints bound the geometries a run keeps
// prepared: the constant of a query is met first and stays; the documents'
// own fill the rest.
const (
	maxCachedShapes = 32
	maxCachedPoints = 1 << 16
)

// prepared is a valid geometry argument ready for the predicates: on the
// sphere (s) or, in a run on the plane, there (p).
type prepared struct {
	g geometry
	s *shape
	p *planarShape
}

// spatialArg reads a valid geometry argument. A line or polygon is
// prepared once per run (its validity check alone is quadratic in its
// edges): a constant argument is met on every row.
func spatialArg(c *evalCtx, a []value, i int) (*prepared, bool) {
	var key uint64
	cache := false
	if o := a[i].object(); o != nil {
		if t := o.get("type"); t.k == kString && t.str() != "Point" {
			cache, key = true, hashValue(fnvOffset, a[i])
			if s, ok := c.shapes[key]; ok && equalValues(s.v, a[i]) {
				return s.s, s.s != nil
			}
		}
	}
	var s *prepared
	if g, why, ok := parseGeometryOn(a[i], c.planar); ok && why == "" {
		s = &prepared{g: g}
		if c.planar {
			s.p = newPlanarShape(g)
		} else {
			s.s = newShape(g)
		}
	}
	if cache && len(c.shapes) < maxCachedShapes && (s == nil || c.shapePoints+s.points() <= maxCachedPoints) {
		if c.shapes == nil {
			c.shapes = map[uint64]cachedShape{}
		}
		if _, taken := c.shapes[key]; !taken {
			c.shapes[key] = cachedShape{a[i], s}
			if s != nil {
				c.shapePoints += s.points()
			}
		}
	}
	return s, s != nil
}

// points is how many vertices a prepared geometry holds.
func (p *prepared) points() int {
	if p.s != nil {
		return len(p.s.points)
	}
	return len(p.p.points)
}

// cachedShape is a prepared geometry (nil: not a valid one) and the value
// it was prepared from.
type cachedShape struct {
	v value
	s *prepared
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// hashValue folds a value into an FNV-1a hash: numbers by their bits,
// strings and property names by their bytes.
func hashValue(h uint64, v value) uint64 {
	h = (h ^ uint64(v.k)) * fnvPrime
	switch v.k {
	case kBool:
		if v.b {
			h = (h ^ 1) * fnvPrime
		}
	case kNumber:
		h = (h ^ math.Float64bits(v.n)) * fnvPrime
	case kString:
		s := v.str()
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * fnvPrime
		}
	case kArray:
		for _, e := range v.array() {
			h = hashValue(h, e)
		}
	case kObject:
		o := v.object()
		for i, k := range o.keys {
			h = hashValue(h, strV(k))
			h = hashValue(h, o.vals[i])
		}
	}
	return h
}

func init() {
	register("ST_DISTANCE", 2, 2, func(c *evalCtx, a []value) value {
		x, ok1 := spatialArg(c, a, 0)
		y, ok2 := spatialArg(c, a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		if c.planar {
			return numResult(planarDistance(x.p, y.p))
		}
		return numResult(distance(x.s, y.s))
	})
	register("ST_WITHIN", 2, 2, func(c *evalCtx, a []value) value {
		x, ok1 := spatialArg(c, a, 0)
		y, ok2 := spatialArg(c, a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		if c.planar {
			return boolV(within(x.p, y.p))
		}
		return boolV(within(x.s, y.s))
	})
	register("ST_INTERSECTS", 2, 2, func(c *evalCtx, a []value) value {
		x, ok1 := spatialArg(c, a, 0)
		y, ok2 := spatialArg(c, a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		if c.planar {
			return boolV(intersects(x.p, y.p))
		}
		return boolV(intersects(x.s, y.s))
	})
	register("ST_AREA", 1, 1, func(c *evalCtx, a []value) value {
		x, ok := spatialArg(c, a, 0)
		if !ok {
			return undef
		}
		if c.planar {
			return numResult(planarArea(x.p))
		}
		return numResult(area(x.g))
	})
	register("ST_ISVALID", 1, 1, func(c *evalCtx, a []value) value {
		valid, _, ok := spatialValidity(a[0], c.planar)
		if !ok {
			return undef
		}
		return boolV(valid)
	})
	register("ST_ISVALIDDETAILED", 1, 1, func(c *evalCtx, a []value) value {
		valid, reason, ok := spatialValidity(a[0], c.planar)
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
func spatialValidity(v value, planar bool) (valid bool, reason string, ok bool) {
	o := v.object()
	if o == nil {
		return false, "", false
	}
	_, why, known := parseGeometryOn(v, planar)
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
