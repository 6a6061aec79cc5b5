package query

import "math"

// The geodesy of the spatial functions, as the service computes them for
// its default reference system, WGS-84:
//
//   - distances are along the geodesic of the WGS-84 ellipsoid (Vincenty's
//     inverse formula, accurate to a fraction of a millimetre), in meters;
//   - areas are of the region on the ellipsoid bounded by geodesic edges,
//     in square meters: every edge is divided into pieces short enough that
//     the piece on the authalic sphere (the sphere of equal area, onto which
//     the ellipsoid maps preserving area) is its great circle arc;
//   - which side of an edge a point lies on, whether edges cross and which
//     region a ring encloses are decided on the unit sphere, edges being
//     great circle arcs: the ring's region lies to the left of its walk
//     (counterclockwise rings enclose what they surround, clockwise ones the
//     rest of the earth).

const (
	wgs84A = 6378137.0
	wgs84F = 1 / 298.257223563
	wgs84B = wgs84A * (1 - wgs84F)
	// meanRadius is used only where Vincenty's iteration does not converge
	// (nearly antipodal points).
	meanRadius = 6371008.8
)

var (
	wgs84E2 = wgs84F * (2 - wgs84F)
	wgs84E  = math.Sqrt(wgs84E2)
	// qPole is q(90°) of the authalic latitude; authalicR the radius of the
	// sphere with the ellipsoid's area.
	qPole     = authalicQ(1)
	authalicR = wgs84A * math.Sqrt(qPole/2)
)

const deg = math.Pi / 180

// vec3 is a point of the unit sphere (or a vector) in earth-centred
// coordinates.
type vec3 struct{ x, y, z float64 }

func (a vec3) dot(b vec3) float64 { return a.x*b.x + a.y*b.y + a.z*b.z }
func (a vec3) cross(b vec3) vec3 {
	return vec3{a.y*b.z - a.z*b.y, a.z*b.x - a.x*b.z, a.x*b.y - a.y*b.x}
}
func (a vec3) add(b vec3) vec3      { return vec3{a.x + b.x, a.y + b.y, a.z + b.z} }
func (a vec3) sub(b vec3) vec3      { return vec3{a.x - b.x, a.y - b.y, a.z - b.z} }
func (a vec3) scale(f float64) vec3 { return vec3{a.x * f, a.y * f, a.z * f} }
func (a vec3) norm() float64        { return math.Sqrt(a.dot(a)) }
func (a vec3) normalize() vec3      { n := a.norm(); return vec3{a.x / n, a.y / n, a.z / n} }
func (a vec3) angle(b vec3) float64 { return math.Atan2(a.cross(b).norm(), a.dot(b)) }
func (p lonLat) vec() vec3          { return sphereVec(p.lon, p.lat) }
func (a vec3) lonLat() lonLat {
	return lonLat{math.Atan2(a.y, a.x) / deg, math.Asin(clamp1(a.z/a.norm())) / deg}
}
func clamp1(f float64) float64        { return math.Max(-1, math.Min(1, f)) }
func sign3(a, b, c vec3) float64      { return a.cross(b).dot(c) }
func sameSign(a, b float64) bool      { return a > 0 && b > 0 || a < 0 && b < 0 }
func (p lonLat) equal(q lonLat) bool  { return p.lon == q.lon && p.lat == q.lat }
func sphereVec(lon, lat float64) vec3 { return latVec(lon*deg, lat*deg) }
func latVec(lonR, latR float64) vec3 {
	sl, cl := math.Sincos(latR)
	so, co := math.Sincos(lonR)
	return vec3{cl * co, cl * so, sl}
}

// lonLat is a GeoJSON position in degrees.
type lonLat struct{ lon, lat float64 }

// geodesicInverse returns the length in meters of the geodesic between two
// positions, and its azimuth at p (radians clockwise from north).
func geodesicInverse(p, q lonLat) (dist, azimuth float64) {
	if p.equal(q) {
		return 0, 0
	}
	f := wgs84F
	L := (q.lon - p.lon) * deg
	U1 := math.Atan((1 - f) * math.Tan(p.lat*deg))
	U2 := math.Atan((1 - f) * math.Tan(q.lat*deg))
	sU1, cU1 := math.Sincos(U1)
	sU2, cU2 := math.Sincos(U2)
	lambda := L
	var sSig, cSig, sig, cos2A, cos2Sm, sinL, cosL float64
	converged := false
	for range 200 {
		sinL, cosL = math.Sincos(lambda)
		t1, t2 := cU2*sinL, cU1*sU2-sU1*cU2*cosL
		sSig = math.Sqrt(t1*t1 + t2*t2)
		if sSig == 0 {
			return 0, 0 // coincident points
		}
		cSig = sU1*sU2 + cU1*cU2*cosL
		sig = math.Atan2(sSig, cSig)
		sA := cU1 * cU2 * sinL / sSig
		cos2A = 1 - sA*sA
		cos2Sm = 0.0
		if cos2A != 0 {
			cos2Sm = cSig - 2*sU1*sU2/cos2A
		}
		C := f / 16 * cos2A * (4 + f*(4-3*cos2A))
		prev := lambda
		lambda = L + (1-C)*f*sA*(sig+C*sSig*(cos2Sm+C*cSig*(-1+2*cos2Sm*cos2Sm)))
		if math.Abs(lambda-prev) < 1e-13 {
			converged = true
			break
		}
	}
	if !converged {
		// Nearly antipodal: the sphere's answer is within a few
		// hundredths of a percent.
		a, b := p.vec(), q.vec()
		return meanRadius * a.angle(b), 0
	}
	u2 := cos2A * (wgs84A*wgs84A - wgs84B*wgs84B) / (wgs84B * wgs84B)
	A := 1 + u2/16384*(4096+u2*(-768+u2*(320-175*u2)))
	B := u2 / 1024 * (256 + u2*(-128+u2*(74-47*u2)))
	dSig := B * sSig * (cos2Sm + B/4*(cSig*(-1+2*cos2Sm*cos2Sm)-B/6*cos2Sm*(-3+4*sSig*sSig)*(-3+4*cos2Sm*cos2Sm)))
	dist = wgs84B * A * (sig - dSig)
	azimuth = math.Atan2(cU2*sinL, cU1*sU2-sU1*cU2*cosL)
	return dist, azimuth
}

// geodesicDirect returns the position reached from p along the geodesic
// leaving at azimuth (radians clockwise from north) after dist meters.
func geodesicDirect(p lonLat, azimuth, dist float64) lonLat {
	f := wgs84F
	sA1, cA1 := math.Sincos(azimuth)
	tU1 := (1 - f) * math.Tan(p.lat*deg)
	cU1 := 1 / math.Sqrt(1+tU1*tU1)
	sU1 := tU1 * cU1
	sig1 := math.Atan2(tU1, cA1)
	sA := cU1 * sA1
	cos2A := 1 - sA*sA
	u2 := cos2A * (wgs84A*wgs84A - wgs84B*wgs84B) / (wgs84B * wgs84B)
	A := 1 + u2/16384*(4096+u2*(-768+u2*(320-175*u2)))
	B := u2 / 1024 * (256 + u2*(-128+u2*(74-47*u2)))
	sig := dist / (wgs84B * A)
	var sSig, cSig, cos2Sm float64
	for range 200 {
		cos2Sm = math.Cos(2*sig1 + sig)
		sSig, cSig = math.Sincos(sig)
		dSig := B * sSig * (cos2Sm + B/4*(cSig*(-1+2*cos2Sm*cos2Sm)-B/6*cos2Sm*(-3+4*sSig*sSig)*(-3+4*cos2Sm*cos2Sm)))
		prev := sig
		sig = dist/(wgs84B*A) + dSig
		if math.Abs(sig-prev) < 1e-13 {
			break
		}
	}
	sSig, cSig = math.Sincos(sig)
	cos2Sm = math.Cos(2*sig1 + sig)
	x := sU1*sSig - cU1*cSig*cA1
	lat := math.Atan2(sU1*cSig+cU1*sSig*cA1, (1-f)*math.Sqrt(sA*sA+x*x))
	lam := math.Atan2(sSig*sA1, cU1*cSig-sU1*sSig*cA1)
	C := f / 16 * cos2A * (4 + f*(4-3*cos2A))
	L := lam - (1-C)*f*sA*(sig+C*sSig*(cos2Sm+C*cSig*(-1+2*cos2Sm*cos2Sm)))
	lon := p.lon*deg + L
	lon = math.Remainder(lon, 2*math.Pi)
	return lonLat{lon / deg, lat / deg}
}

// authalicQ is q(φ) of the authalic latitude, from sin φ.
func authalicQ(s float64) float64 {
	e, e2 := wgs84E, wgs84E2
	return (1 - e2) * (s/(1-e2*s*s) - 1/(2*e)*math.Log((1-e*s)/(1+e*s)))
}

// authalicVec maps a position to the authalic sphere (unit radius): equal
// areas of the ellipsoid stay equal there.
func authalicVec(p lonLat) vec3 {
	xi := math.Asin(clamp1(authalicQ(math.Sin(p.lat*deg)) / qPole))
	return latVec(p.lon*deg, xi)
}

// triangleArea is the signed area of the spherical triangle abc on the unit
// sphere: positive when counterclockwise (Van Oosterom and Strackee).
func triangleArea(a, b, c vec3) float64 {
	num := a.dot(b.cross(c))
	den := 1 + a.dot(b) + b.dot(c) + c.dot(a)
	return 2 * math.Atan2(num, den)
}

// areaPiece is how long, in meters, an edge's pieces are at most when an
// area is computed: short enough that a piece's geodesic and its authalic
// great circle enclose the same area to well under a millionth.
const areaPiece = 2000.0

// ringArea returns the area in square meters of the region to the left of a
// closed ring's walk on the ellipsoid.
func ringArea(ring []lonLat) float64 {
	if len(ring) < 4 {
		return 0
	}
	var pts []vec3
	for i := 0; i+1 < len(ring); i++ {
		p, q := ring[i], ring[i+1]
		pts = append(pts, authalicVec(p))
		d, az := geodesicInverse(p, q)
		n := int(math.Ceil(d / areaPiece))
		if n > 4096 {
			n = 4096
		}
		for k := 1; k < n; k++ {
			pts = append(pts, authalicVec(geodesicDirect(p, az, d*float64(k)/float64(n))))
		}
	}
	// The triangles fan out of a point away from the ring's vertices: their
	// centroid, or a pole when they balance out (a ring around the equator).
	var o vec3
	for _, p := range pts {
		o = o.add(p)
	}
	if o.norm() > 0.1*float64(len(pts)) {
		o = o.normalize()
	} else {
		o = vec3{0, 0, 1}
		for _, p := range pts {
			if p.dot(o) < -0.999 {
				o = vec3{1, 0, 0}
				break
			}
		}
	}
	s := 0.0
	pts = append(pts, pts[0])
	for i := 0; i+1 < len(pts); i++ {
		s += triangleArea(o, pts[i], pts[i+1])
	}
	if s < 0 {
		s += 4 * math.Pi
	}
	return s * authalicR * authalicR
}

// sphereRingArea is the area on the unit sphere of the region to the left
// of a closed ring whose edges are great circle arcs (0 to 4π).
func sphereRingArea(v []vec3) float64 {
	if len(v) < 4 {
		return 0
	}
	o := vec3{}
	for _, p := range v[:len(v)-1] {
		o = o.add(p)
	}
	if o.norm() > 0.1*float64(len(v)) {
		o = o.normalize()
	} else {
		o = vec3{0, 0, 1}
	}
	s := 0.0
	for i := 0; i+1 < len(v); i++ {
		s += triangleArea(o, v[i], v[i+1])
	}
	if s < 0 {
		s += 4 * math.Pi
	}
	return s
}

// earthArea is the area of the ellipsoid in square meters.
var earthArea = 4 * math.Pi * authalicR * authalicR

// crosses reports whether the great circle arcs ab and cd cross at a point
// interior to both (the four triangles ACB, BDA, CBD, DAC turn alike).
func crosses(a, b, c, d vec3) bool {
	acb := sign3(a, c, b)
	bda := sign3(b, d, a)
	if !sameSign(acb, bda) {
		return false
	}
	cbd := sign3(c, b, d)
	dac := sign3(d, a, c)
	return sameSign(cbd, acb) && sameSign(dac, acb)
}

// arcClosest returns the point of the arc ab closest to p (all unit).
func arcClosest(p, a, b vec3) vec3 {
	n := a.cross(b)
	if n.norm() < 1e-15 {
		return a
	}
	n = n.normalize()
	// p projected onto the arc's great circle.
	proj := p.sub(n.scale(p.dot(n)))
	if proj.norm() < 1e-15 {
		return a
	}
	proj = proj.normalize()
	// On the arc when it lies between a and b.
	if sign3(a, proj, n) >= 0 && sign3(proj, b, n) >= 0 {
		return proj
	}
	if p.angle(a) <= p.angle(b) {
		return a
	}
	return b
}

// onArc reports whether p lies on the arc ab (within about a millimetre).
func onArc(p, a, b vec3) bool {
	return p.angle(arcClosest(p, a, b)) < 1.5e-10
}

// ringRegion is a closed ring prepared for containment tests: its vertices
// on the unit sphere and a reference point known to lie to the left of its
// first non-degenerate edge, inside its region.
type ringRegion struct {
	v   []vec3 // closed: v[0] == v[len-1]
	ref vec3
	ok  bool // false for a ring with no edge
}

func newRingRegion(ring []lonLat) ringRegion {
	r := ringRegion{v: make([]vec3, len(ring))}
	for i, p := range ring {
		r.v[i] = p.vec()
	}
	for i := 0; i+1 < len(r.v); i++ {
		a, b := r.v[i], r.v[i+1]
		n := a.cross(b)
		if n.norm() < 1e-12 {
			continue
		}
		mid := a.add(b).normalize()
		r.ref = mid.add(n.normalize().scale(1e-9)).normalize()
		r.ok = true
		break
	}
	return r
}

// contains reports whether p lies in the ring's region (on its boundary
// counts as inside): the walk from the reference point to p crosses the
// ring an even number of times.
func (r ringRegion) contains(p vec3) bool {
	if !r.ok {
		return false
	}
	for i := 0; i+1 < len(r.v); i++ {
		if onArc(p, r.v[i], r.v[i+1]) {
			return true
		}
	}
	// Two legs, each shorter than half the earth, through a point between.
	var mid vec3
	if s := r.ref.add(p); s.norm() > 0.2 {
		mid = s.normalize()
	} else {
		o := p.cross(vec3{0, 0, 1})
		if o.norm() < 0.1 {
			o = p.cross(vec3{1, 0, 0})
		}
		mid = o.normalize()
	}
	n := 0
	for i := 0; i+1 < len(r.v); i++ {
		a, b := r.v[i], r.v[i+1]
		if crosses(r.ref, mid, a, b) {
			n++
		}
		if crosses(mid, p, a, b) {
			n++
		}
	}
	return n%2 == 0
}
