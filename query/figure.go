package query

// The predicates ST_INTERSECTS and ST_WITHIN decide the same way on the
// sphere (geojson.go) and on the plane (planar.go): from a geometry's
// vertices, its edges and its regions. Only the primitives differ, and a
// surface supplies them: what a point is, when one lies on an edge, when
// two edges cross, when a region holds a point.

// surface is the space a geometry lies in: P is its point, R its region
// (a polygon, its boundary and holes), both as the surface prepares them.
type surface[P, R any] interface {
	// same reports whether p and q are one point.
	same(p, q P) bool
	// onEdge reports whether p lies on the edge ab.
	onEdge(p, a, b P) bool
	// cross reports whether the edges ab and cd cross at a point interior
	// to both.
	cross(a, b, c, d P) bool
	// holds reports whether r holds p (its boundary counts, a hole's
	// inside does not).
	holds(r R, p P) bool
	// rings is r's closed rings, its boundary first, then its holes, as
	// the region's edges walk them.
	rings(r R) [][]P
	// holeInside reports whether p, a vertex of another polygon's hole,
	// lies inside the polygon of regions and not on its boundary: the hole
	// then cuts into it, which ST_WITHIN refuses.
	holeInside(regions []R, p P) bool
}

// figure is a geometry prepared for the predicates on surface S: every
// vertex, every edge of its lines and rings, and its regions.
type figure[P, R any, S surface[P, R]] struct {
	g       geometry
	points  []P
	edges   [][2]P
	regions []R
}

// regionFigure is the polygon of one region r.
func regionFigure[P, R any, S surface[P, R]](r R) *figure[P, R, S] {
	var s S
	f := &figure[P, R, S]{g: geometry{kind: "Polygon"}, regions: []R{r}}
	for _, ring := range s.rings(r) {
		for i := 0; i+1 < len(ring); i++ {
			f.points = append(f.points, ring[i])
			f.edges = append(f.edges, [2]P{ring[i], ring[i+1]})
		}
	}
	return f
}

// covers reports whether p lies in the figure (in a region, on a line, or
// on the point).
func (f *figure[P, R, S]) covers(p P) bool {
	var s S
	switch f.g.kind {
	case "Point":
		return s.same(p, f.points[0])
	case "LineString":
		for _, e := range f.edges {
			if s.onEdge(p, e[0], e[1]) {
				return true
			}
		}
		return false
	}
	for _, r := range f.regions {
		if s.holds(r, p) {
			return true
		}
	}
	return false
}

// edgesCross reports whether an edge of a crosses an edge of b.
func edgesCross[P, R any, S surface[P, R]](a, b *figure[P, R, S]) bool {
	var s S
	for _, e := range a.edges {
		for _, f := range b.edges {
			if s.cross(e[0], e[1], f[0], f[1]) {
				return true
			}
		}
	}
	return false
}

// intersects is ST_INTERSECTS: the figures share a point.
func intersects[P, R any, S surface[P, R]](a, b *figure[P, R, S]) bool {
	for _, p := range a.points {
		if b.covers(p) {
			return true
		}
	}
	for _, p := range b.points {
		if a.covers(p) {
			return true
		}
	}
	return edgesCross(a, b)
}

// within is ST_WITHIN: every point of a lies in b. In a polygon of b: a's
// vertices inside it, no edge of a crossing its boundary, and none of its
// holes inside a.
func within[P, R any, S surface[P, R]](a, b *figure[P, R, S]) bool {
	var s S
	switch b.g.kind {
	case "Point":
		return a.g.kind == "Point" && b.covers(a.points[0])
	case "LineString":
		if a.g.kind != "Point" && a.g.kind != "LineString" {
			return false
		}
		for _, p := range a.points {
			if !b.covers(p) {
				return false
			}
		}
		return true
	}
	if a.g.kind == "MultiPolygon" {
		for _, r := range a.regions {
			if !within(regionFigure[P, R, S](r), b) {
				return false
			}
		}
		return true
	}
	for _, r := range b.regions {
		ok := true
		for _, p := range a.points {
			if !s.holds(r, p) {
				ok = false
				break
			}
		}
		if ok && edgesCross(a, regionFigure[P, R, S](r)) {
			ok = false
		}
		if ok && len(a.regions) > 0 {
			for _, h := range s.rings(r)[1:] {
				for _, p := range h {
					if s.holeInside(a.regions, p) {
						ok = false
					}
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}
