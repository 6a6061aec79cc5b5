package query

import (
	"encoding/json"
	"math"
)

// SpatialOp is how a spatial filter relates a document path to a constant
// geometry. Each implies that the document's geometry meets a region
// around the constant one: the engine's spatial index narrows the
// documents to those, and the query is evaluated in full on them.
type SpatialOp int

// The spatial filter operators.
const (
	SpatialWithin     SpatialOp = iota + 1 // ST_WITHIN(path, geometry)
	SpatialContains                        // ST_WITHIN(geometry, path)
	SpatialIntersects                      // ST_INTERSECTS of the path and the geometry
	SpatialDistance                        // ST_DISTANCE(path, geometry) < Distance (or <=)
)

var spatialOpNames = [...]string{"", "ST_WITHIN", "ST_WITHIN", "ST_INTERSECTS", "ST_DISTANCE"}

// String returns the function's name.
func (op SpatialOp) String() string {
	if op > 0 && int(op) < len(spatialOpNames) {
		return spatialOpNames[op]
	}
	return "?"
}

// SpatialFilter is a WHERE conjunct a spatial index can serve.
type SpatialFilter struct {
	Path     []string
	Op       SpatialOp
	Geometry json.RawMessage
	// Distance is the bound in meters of SpatialDistance (inclusive).
	Distance float64
}

// Region is the box in which every document geometry the filter can
// match meets: the constant's bounds, widened by Distance.
func (f SpatialFilter) Region() (GeoBox, bool) {
	b, ok := GeoBounds(f.Geometry)
	if !ok {
		return GeoBox{}, false
	}
	if f.Op == SpatialDistance {
		b = b.Expand(f.Distance)
	}
	return b, true
}

// spatialConjuncts lists the spatial filters among the conjuncts of x.
func (a analyzer) spatialConjuncts(x expr, out []SpatialFilter) []SpatialFilter {
	switch n := x.(type) {
	case *andExpr:
		return a.spatialConjuncts(n.r, a.spatialConjuncts(n.l, out))
	case *binaryExpr:
		// ST_DISTANCE(...) < r, <= r, and r > ST_DISTANCE(...), r >= ...
		call, limit := n.l, n.r
		switch n.op {
		case "<", "<=":
		case ">", ">=":
			call, limit = n.r, n.l
		default:
			return out
		}
		c, ok := call.(*callExpr)
		if !ok || c.udf || upper(c.name) != "ST_DISTANCE" || len(c.args) != 2 {
			return out
		}
		raw, ok := a.constant(limit)
		var r float64
		if !ok || json.Unmarshal(raw, &r) != nil || math.IsNaN(r) {
			return out
		}
		if f, ok := a.spatialCall(c, SpatialDistance, SpatialDistance); ok {
			f.Distance = r
			return append(out, f)
		}
	case *callExpr:
		if n.udf || len(n.args) != 2 {
			return out
		}
		switch upper(n.name) {
		case "ST_WITHIN":
			if f, ok := a.spatialCall(n, SpatialWithin, SpatialContains); ok {
				return append(out, f)
			}
		case "ST_INTERSECTS":
			if f, ok := a.spatialCall(n, SpatialIntersects, SpatialIntersects); ok {
				return append(out, f)
			}
		}
	}
	return out
}

// spatialCall reads a spatial function of a document path and a constant
// geometry, in either order (op when the path comes first, swapped else).
func (a analyzer) spatialCall(c *callExpr, op, swapped SpatialOp) (SpatialFilter, bool) {
	for i, o := range []SpatialOp{op, swapped} {
		path, ok := a.docPath(c.args[i])
		if !ok || len(path) == 0 {
			continue
		}
		raw, ok := a.constant(c.args[1-i])
		if !ok {
			continue
		}
		if _, ok := GeoBounds(raw); !ok {
			continue
		}
		return SpatialFilter{Path: path, Op: o, Geometry: raw}, true
	}
	return SpatialFilter{}, false
}

// GeoBox is a box of longitudes and latitudes in degrees that holds a
// geometry: West > East when it crosses the antimeridian is not used; a box
// across it spans every longitude.
type GeoBox struct {
	West, South, East, North float64
}

// world is the box of the whole earth.
var world = GeoBox{-180, -90, 180, 90}

// GeoBounds returns a box that holds a valid GeoJSON geometry (its edges'
// bulges toward the poles included), or false when raw is not one.
func GeoBounds(raw json.RawMessage) (GeoBox, bool) {
	v, err := decodeJSON(raw)
	if err != nil {
		return GeoBox{}, false
	}
	g, why, ok := parseGeometry(v)
	if !ok || why != "" {
		return GeoBox{}, false
	}
	return geometryBounds(g), true
}

func geometryBounds(g geometry) GeoBox {
	if g.kind == "Point" {
		return GeoBox{g.point.lon, g.point.lat, g.point.lon, g.point.lat}
	}
	b := GeoBox{West: 180, South: 90, East: -180, North: -90}
	wraps := false
	edge := func(p, q lonLat) {
		b.West, b.East = math.Min(b.West, math.Min(p.lon, q.lon)), math.Max(b.East, math.Max(p.lon, q.lon))
		b.South, b.North = math.Min(b.South, math.Min(p.lat, q.lat)), math.Max(b.North, math.Max(p.lat, q.lat))
		if math.Abs(p.lon-q.lon) > 180 {
			wraps = true
		}
		// The arc's highest and lowest points may lie inside it.
		a, c := p.vec(), q.vec()
		n := a.cross(c)
		if n.norm() < 1e-15 {
			return
		}
		n = n.normalize()
		for _, pole := range []vec3{{0, 0, 1}, {0, 0, -1}} {
			top := pole.sub(n.scale(pole.dot(n)))
			if top.norm() < 1e-15 {
				continue
			}
			top = top.normalize()
			if onArc(top, a, c) {
				lat := math.Asin(clamp1(top.z)) / deg
				b.South, b.North = math.Min(b.South, lat), math.Max(b.North, lat)
			}
		}
	}
	if g.kind == "LineString" {
		for i := 0; i+1 < len(g.line); i++ {
			edge(g.line[i], g.line[i+1])
		}
	}
	for _, rings := range g.polygons {
		for _, ring := range rings {
			for i := 0; i+1 < len(ring); i++ {
				edge(ring[i], ring[i+1])
			}
		}
		// A region holding a pole reaches it at every longitude.
		reg := newRegion(rings)
		if reg.contains(vec3{0, 0, 1}) {
			b.North, wraps = 90, true
		}
		if reg.contains(vec3{0, 0, -1}) {
			b.South, wraps = -90, true
		}
	}
	if wraps {
		b.West, b.East = -180, 180
	}
	return b.pad()
}

// pad widens a box by about a centimetre against rounding.
func (b GeoBox) pad() GeoBox {
	const e = 1e-7
	return GeoBox{math.Max(-180, b.West-e), math.Max(-90, b.South-e), math.Min(180, b.East+e), math.Min(90, b.North+e)}
}

// minRadius is below every radius of curvature of the ellipsoid (the
// meridian's at the equator, a(1-e²)): an arc of d meters on it spans at
// most d/minRadius radians of latitude.
const minRadius = 6335439.0

// Expand widens a box by meters in every direction.
func (b GeoBox) Expand(meters float64) GeoBox {
	if meters <= 0 {
		return b
	}
	rho := meters / minRadius * 1.001 // radians, with a margin
	if rho >= math.Pi/2 {
		return world
	}
	dlat := rho / deg
	out := GeoBox{b.West, b.South - dlat, b.East, b.North + dlat}
	if out.South <= -90 || out.North >= 90 {
		out.South, out.North = math.Max(out.South, -90), math.Min(out.North, 90)
		out.West, out.East = -180, 180
		return out
	}
	// A cap of angular radius rho around latitude φ spans asin(sin rho /
	// cos φ) of longitude; the widest is at the box's highest latitude.
	far := math.Max(math.Abs(out.South), math.Abs(out.North)) * deg
	s := math.Sin(rho) / math.Cos(far)
	if s >= 1 {
		out.West, out.East = -180, 180
		return out
	}
	dlon := math.Asin(s) / deg
	out.West, out.East = b.West-dlon, b.East+dlon
	if out.West < -180 || out.East > 180 {
		out.West, out.East = -180, 180
	}
	return out
}
