package query

import "math"

// The spatial functions on the plane, for a container whose
// geospatialConfig type is Geometry: coordinates are x and y of a flat
// coordinate system, distances and areas in its units, edges straight
// segments, and a polygon's rings bound its region whichever way they are
// walked (its first ring the boundary, the others holes).

// pt2 is a position on the plane.
type pt2 struct{ x, y float64 }

func (p lonLat) xy() pt2 { return pt2{p.lon, p.lat} }

// orient is the sign of the turn a → b → c: > 0 to the left.
func orient(a, b, c pt2) float64 { return (b.x-a.x)*(c.y-a.y) - (b.y-a.y)*(c.x-a.x) }

// onSegment reports whether p lies on the segment ab.
func onSegment(p, a, b pt2) bool {
	return orient(a, b, p) == 0 && math.Min(a.x, b.x) <= p.x && p.x <= math.Max(a.x, b.x) &&
		math.Min(a.y, b.y) <= p.y && p.y <= math.Max(a.y, b.y)
}

// segmentsCross reports whether segments ab and cd cross at a point
// interior to both.
func segmentsCross(a, b, c, d pt2) bool {
	return sameSign(orient(a, b, c), -orient(a, b, d)) && sameSign(orient(c, d, a), -orient(c, d, b))
}

// segmentDistance is the distance from p to the segment ab.
func segmentDistance(p, a, b pt2) float64 {
	dx, dy := b.x-a.x, b.y-a.y
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = math.Max(0, math.Min(1, ((p.x-a.x)*dx+(p.y-a.y)*dy)/l))
	}
	return math.Hypot(p.x-(a.x+t*dx), p.y-(a.y+t*dy))
}

// plane is the surface of the spatial functions on the plane: points pt2,
// edges straight segments, regions polygons (their rings, the boundary
// first) whose rings bound them whichever way they are walked (figure.go).
type plane struct{}

func (plane) same(p, q pt2) bool             { return p == q }
func (plane) onEdge(p, a, b pt2) bool        { return onSegment(p, a, b) }
func (plane) cross(a, b, c, d pt2) bool      { return segmentsCross(a, b, c, d) }
func (plane) holds(poly [][]pt2, p pt2) bool { return polygonHolds(poly, p) }
func (plane) rings(poly [][]pt2) [][]pt2     { return poly }

func (plane) holeInside(polys [][][]pt2, p pt2) bool {
	in, edge := ringHolds(polys[0][0], p)
	return in && !edge
}

// planarShape is a geometry's vertices, segments and polygons on the plane.
type planarShape = figure[pt2, [][]pt2, plane]

func newPlanarShape(g geometry) *planarShape {
	s := &planarShape{g: g}
	switch g.kind {
	case "Point":
		s.points = []pt2{g.point.xy()}
	case "LineString":
		for i, p := range g.line {
			s.points = append(s.points, p.xy())
			if i > 0 {
				s.edges = append(s.edges, [2]pt2{s.points[i-1], s.points[i]})
			}
		}
	default:
		for _, rings := range g.polygons {
			var poly [][]pt2
			for _, ring := range rings {
				r := make([]pt2, len(ring))
				for i, p := range ring {
					r[i] = p.xy()
					if i > 0 {
						s.edges = append(s.edges, [2]pt2{r[i-1], r[i]})
						s.points = append(s.points, r[i])
					}
				}
				poly = append(poly, r)
			}
			s.regions = append(s.regions, poly)
		}
	}
	return s
}

// ringHolds reports whether p lies inside a closed ring or on it.
func ringHolds(ring []pt2, p pt2) (inside, boundary bool) {
	for i := 0; i+1 < len(ring); i++ {
		a, b := ring[i], ring[i+1]
		if onSegment(p, a, b) {
			return true, true
		}
		if (a.y > p.y) != (b.y > p.y) && p.x < a.x+(p.y-a.y)*(b.x-a.x)/(b.y-a.y) {
			inside = !inside
		}
	}
	return inside, false
}

// polygonHolds reports whether p lies in a polygon (its boundary counts).
func polygonHolds(poly [][]pt2, p pt2) bool {
	in, _ := ringHolds(poly[0], p)
	if !in {
		return false
	}
	for _, h := range poly[1:] {
		if in, edge := ringHolds(h, p); in && !edge {
			return false
		}
	}
	return true
}

// planarDistance is ST_DISTANCE on the plane.
func planarDistance(a, b *planarShape) float64 {
	if intersects(a, b) {
		return 0
	}
	best := math.Inf(1)
	near := func(from, to *planarShape) {
		for _, p := range from.points {
			if len(to.edges) == 0 {
				for _, q := range to.points {
					best = math.Min(best, math.Hypot(p.x-q.x, p.y-q.y))
				}
				continue
			}
			for _, e := range to.edges {
				best = math.Min(best, segmentDistance(p, e[0], e[1]))
			}
		}
	}
	near(a, b)
	near(b, a)
	return best
}

// planarArea is ST_AREA on the plane: each polygon's boundary less its
// holes (shoelace).
func planarArea(s *planarShape) float64 {
	ring := func(r []pt2) float64 {
		sum := 0.0
		for i := 0; i+1 < len(r); i++ {
			sum += r[i].x*r[i+1].y - r[i+1].x*r[i].y
		}
		return math.Abs(sum) / 2
	}
	total := 0.0
	for _, poly := range s.regions {
		a := ring(poly[0])
		for _, h := range poly[1:] {
			a -= ring(h)
		}
		total += a
	}
	return total
}

// planarSelfIntersection reports whether two segments of a ring cross.
func planarSelfIntersection(ring []lonLat) bool {
	if len(ring) > 512 {
		return false
	}
	for i := 0; i+1 < len(ring); i++ {
		for j := i + 2; j+1 < len(ring); j++ {
			if i == 0 && j == len(ring)-2 {
				continue
			}
			if segmentsCross(ring[i].xy(), ring[i+1].xy(), ring[j].xy(), ring[j+1].xy()) {
				return true
			}
		}
	}
	return false
}
