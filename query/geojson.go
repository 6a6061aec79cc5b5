package query

import (
	"fmt"
	"math"
)

// geometry is a GeoJSON object of a type the spatial functions take: a
// Point, a LineString, a Polygon (its first ring the boundary, the others
// holes) or a MultiPolygon.
type geometry struct {
	kind     string       // "Point", "LineString", "Polygon", "MultiPolygon"
	point    lonLat       // Point
	line     []lonLat     // LineString
	polygons [][][]lonLat // Polygon (one) or MultiPolygon: rings of positions
}

// parseGeometry reads a GeoJSON value. ok is false when the value is not a
// GeoJSON object of a supported type at all (the functions answer
// undefined); reason, when not empty, says why a GeoJSON object is not valid.
func parseGeometry(v value) (g geometry, reason string, ok bool) {
	return parseGeometryOn(v, false)
}

// parseGeometryOn is parseGeometry on the sphere or, planar, on the plane
// (where coordinates have no range).
func parseGeometryOn(v value, planar bool) (g geometry, reason string, ok bool) {
	o := v.object()
	if o == nil {
		return g, "", false
	}
	t := o.get("type")
	if t.k != kString {
		return g, "", false
	}
	g.kind = t.str()
	coords := o.get("coordinates")
	switch g.kind {
	case "Point":
		p, why := parsePosition(coords, planar)
		if why != "" {
			return g, why, true
		}
		g.point = p
	case "LineString":
		line, why := parsePositions(coords, planar)
		if why != "" {
			return g, why, true
		}
		if len(line) < 2 {
			return g, "The LineString input is not valid because it does not have enough points. A LineString must have at least two points.", true
		}
		g.line = line
	case "Polygon":
		rings, why := parseRings(coords, "Polygon", planar)
		if why != "" {
			return g, why, true
		}
		g.polygons = [][][]lonLat{rings}
	case "MultiPolygon":
		if coords.k != kArray {
			return g, "The MultiPolygon input is not valid because its coordinates are not an array of polygons.", true
		}
		for _, pc := range coords.array() {
			rings, why := parseRings(pc, "MultiPolygon", planar)
			if why != "" {
				return g, why, true
			}
			g.polygons = append(g.polygons, rings)
		}
		if len(g.polygons) == 0 {
			return g, "The MultiPolygon input is not valid because it has no polygon.", true
		}
	default:
		return g, "", false
	}
	return g, "", true
}

// parsePosition reads [longitude, latitude] (an altitude after them is
// ignored).
func parsePosition(v value, planar bool) (lonLat, string) {
	a := v.array()
	if v.k != kArray || len(a) < 2 || a[0].k != kNumber || a[1].k != kNumber {
		return lonLat{}, "A position must be an array of at least two numbers: a longitude and a latitude."
	}
	for _, x := range a[2:] {
		if x.k != kNumber {
			return lonLat{}, "A position must be an array of at least two numbers: a longitude and a latitude."
		}
	}
	p := lonLat{a[0].n, a[1].n}
	if planar {
		return p, ""
	}
	if p.lat < -90 || p.lat > 90 {
		return p, "Latitude values must be between -90 and 90 degrees."
	}
	if p.lon < -180 || p.lon > 180 {
		return p, "Longitude values must be between -180 and 180 degrees."
	}
	return p, ""
}

func parsePositions(v value, planar bool) ([]lonLat, string) {
	if v.k != kArray {
		return nil, "The coordinates must be an array of positions."
	}
	out := make([]lonLat, 0, v.l)
	for _, e := range v.array() {
		p, why := parsePosition(e, planar)
		if why != "" {
			return nil, why
		}
		out = append(out, p)
	}
	return out, ""
}

func parseRings(v value, kind string, planar bool) ([][]lonLat, string) {
	if v.k != kArray || v.l == 0 {
		return nil, fmt.Sprintf("The %s input is not valid because it has no ring. A polygon must have at least one ring.", kind)
	}
	var rings [][]lonLat
	for i, rv := range v.array() {
		ring, why := parsePositions(rv, planar)
		if why != "" {
			return nil, why
		}
		if len(ring) < 4 {
			return nil, fmt.Sprintf("The %s input is not valid because the ring number %d does not have enough points. Each ring of a polygon must contain at least four points.", kind, i+1)
		}
		if !ring[0].equal(ring[len(ring)-1]) {
			return nil, fmt.Sprintf("The %s input is not valid because the start and end points of the ring number %d are not the same. Each ring of a polygon must have the same start and end points.", kind, i+1)
		}
		if planar && planarSelfIntersection(ring) || !planar && ringSelfIntersection(ring) {
			return nil, fmt.Sprintf("The %s input is not valid because the ring number %d intersects itself or another ring.", kind, i+1)
		}
		rings = append(rings, ring)
	}
	return rings, ""
}

// ringSelfIntersection reports whether two edges of a ring cross.
func ringSelfIntersection(ring []lonLat) bool {
	if len(ring) > 512 {
		return false // quadratic: the service bounds a geometry's points anyway
	}
	v := make([]vec3, len(ring))
	for i, p := range ring {
		v[i] = p.vec()
	}
	for i := 0; i+1 < len(v); i++ {
		for j := i + 2; j+1 < len(v); j++ {
			if i == 0 && j == len(v)-2 {
				continue // adjacent through the closing point
			}
			if crosses(v[i], v[i+1], v[j], v[j+1]) {
				return true
			}
		}
	}
	return false
}

// region is a polygon prepared for containment: inside its boundary ring's
// region and outside each hole (a hole is the smaller side of its ring,
// whichever way it is walked).
type region struct {
	outer ringRegion
	holes []ringRegion
	rings [][]vec3
}

func newRegion(rings [][]lonLat) region {
	r := region{outer: newRingRegion(rings[0])}
	r.rings = append(r.rings, r.outer.v)
	for _, h := range rings[1:] {
		hr := newRingRegion(h)
		if sphereRingArea(hr.v) > 2*math.Pi {
			hr = newRingRegion(reversed(h))
		}
		r.holes = append(r.holes, hr)
		r.rings = append(r.rings, hr.v)
	}
	return r
}

func reversed(ring []lonLat) []lonLat {
	out := make([]lonLat, len(ring))
	for i, p := range ring {
		out[len(ring)-1-i] = p
	}
	return out
}

func (r region) contains(p vec3) bool {
	if !r.outer.contains(p) {
		return false
	}
	for _, h := range r.holes {
		if h.contains(p) && !onRing(p, h.v) {
			return false
		}
	}
	return true
}

func onRing(p vec3, ring []vec3) bool {
	for i := 0; i+1 < len(ring); i++ {
		if onArc(p, ring[i], ring[i+1]) {
			return true
		}
	}
	return false
}

// sphere is the surface of the geography functions: points on the unit
// sphere, edges the shorter great-circle arcs, regions polygons whose holes
// are the smaller sides of their rings (figure.go).
type sphere struct{}

func (sphere) same(p, q vec3) bool         { return p.angle(q) < 1.5e-10 }
func (sphere) onEdge(p, a, b vec3) bool    { return onArc(p, a, b) }
func (sphere) cross(a, b, c, d vec3) bool  { return crosses(a, b, c, d) }
func (sphere) holds(r region, p vec3) bool { return r.contains(p) }
func (sphere) rings(r region) [][]vec3     { return r.rings }

func (sphere) holeInside(regions []region, p vec3) bool {
	for _, r := range regions {
		if r.contains(p) {
			return !onRing(p, regions[0].outer.v)
		}
	}
	return false
}

// shape is a geometry prepared for the predicates: its vertices, its edges
// and its regions, on the unit sphere.
type shape = figure[vec3, region, sphere]

func newShape(g geometry) *shape {
	s := &shape{g: g}
	switch g.kind {
	case "Point":
		s.points = []vec3{g.point.vec()}
	case "LineString":
		for i, p := range g.line {
			s.points = append(s.points, p.vec())
			if i > 0 {
				s.edges = append(s.edges, [2]vec3{s.points[i-1], s.points[i]})
			}
		}
	default:
		for _, rings := range g.polygons {
			reg := newRegion(rings)
			s.regions = append(s.regions, reg)
			for _, ring := range reg.rings {
				for i := 0; i+1 < len(ring); i++ {
					s.points = append(s.points, ring[i])
					s.edges = append(s.edges, [2]vec3{ring[i], ring[i+1]})
				}
			}
		}
	}
	return s
}

// distance is ST_DISTANCE in meters: 0 when the shapes meet, else the
// geodesic distance between their nearest points.
func distance(a, b *shape) float64 {
	if a.g.kind == "Point" && b.g.kind == "Point" {
		d, _ := geodesicInverse(a.g.point, b.g.point)
		return d
	}
	if intersects(a, b) {
		return 0
	}
	best := math.Inf(1)
	// From each vertex of one to the nearest point of the other's edges
	// (or its point): edges that do not cross are nearest at an end of one.
	near := func(from, to *shape) {
		for _, p := range from.points {
			if len(to.edges) == 0 {
				for _, q := range to.points {
					best = math.Min(best, geoDistance(p, q))
				}
				continue
			}
			for _, e := range to.edges {
				best = math.Min(best, geoDistance(p, arcClosest(p, e[0], e[1])))
			}
		}
	}
	near(a, b)
	near(b, a)
	return best
}

// geoDistance is the geodesic distance between two points of the unit
// sphere read as geodetic positions.
func geoDistance(p, q vec3) float64 {
	d, _ := geodesicInverse(p.lonLat(), q.lonLat())
	return d
}

// area is ST_AREA in square meters: a polygon's region less its holes,
// summed over a MultiPolygon's polygons; 0 for points and lines.
func area(g geometry) float64 {
	total := 0.0
	for _, rings := range g.polygons {
		a := ringArea(rings[0])
		for _, h := range rings[1:] {
			ha := ringArea(h)
			a -= math.Min(ha, earthArea-ha)
		}
		total += a
	}
	return total
}
