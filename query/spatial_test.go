package query

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// scalar runs SELECT VALUE <expr> over one empty document and returns the
// one result's JSON, or "" for undefined.
func scalar(t *testing.T, expr string) string {
	t.Helper()
	rows := run(t, "SELECT VALUE "+expr+" FROM c", []string{`{"id":"x"}`}, Options{})
	if len(rows) == 0 {
		return ""
	}
	return rows[0]
}

func scalarNum(t *testing.T, expr string) float64 {
	t.Helper()
	s := scalar(t, expr)
	var f float64
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatalf("%s = %q, not a number", expr, s)
	}
	return f
}

// ST_DISTANCE is the geodesic distance on the WGS-84 ellipsoid in meters:
// the service's documented answers agree to a millionth, and far pairs to
// what the geodesic gives.
func TestSTDistanceIsTheGeodesicInMeters(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
		tol  float64 // relative
	}{
		// The service's documentation: from its two offices to a point.
		{`[-122.12826822304672, 47.63980239335718]`, `[-122.11758113953535, 47.66901087006131]`, 3345.269817267368, 1e-6},
		{`[-96.84368664765994, 46.81297794314663]`, `[-122.11758113953535, 47.66901087006131]`, 1907438.421299902, 1e-6},
		// One degree of longitude on the equator: a·π/180.
		{`[0, 0]`, `[1, 0]`, 111319.49079327357, 1e-9},
		// Pole to pole through a meridian: twice the quarter meridian.
		{`[0, -90]`, `[0, 90]`, 2 * 10001965.729, 1e-8},
		// Vincenty's own worked example: Flinders Peak to Buninyong.
		{`[144.42486788888889, -37.95103341666667]`, `[143.92649552777778, -37.65282113888889]`, 54972.271, 1e-7},
		// Across the antimeridian: 0.2° of longitude at the equator.
		{`[179.9, 0]`, `[-179.9, 0]`, 22263.898158654713, 1e-9},
		{`[10, 10]`, `[10, 10]`, 0, 0},
	}
	for _, tc := range tests {
		got := scalarNum(t, `ST_DISTANCE({"type":"Point","coordinates":`+tc.a+`}, {"type":"Point","coordinates":`+tc.b+`})`)
		if math.Abs(got-tc.want) > tc.tol*math.Max(tc.want, 1) {
			t.Errorf("%s → %s: %.9f, want %.9f", tc.a, tc.b, got, tc.want)
		}
	}
}

// A point inside a polygon is at distance 0 from it; outside, at the
// distance to the nearest edge; a line at the distance of its nearest point.
func TestSTDistanceToShapesIsToTheNearestPoint(t *testing.T) {
	square := `{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}`
	if d := scalarNum(t, `ST_DISTANCE({"type":"Point","coordinates":[0.5,0.5]}, `+square+`)`); d != 0 {
		t.Errorf("point inside: %v", d)
	}
	// Due west of the edge along the equator-side: one degree of longitude
	// at latitude 0.5 is nearly the equator's.
	d := scalarNum(t, `ST_DISTANCE({"type":"Point","coordinates":[-1,0.5]}, `+square+`)`)
	if want, _ := geodesicInverse(lonLat{-1, 0.5}, lonLat{0, 0.5}); math.Abs(d-want) > 5 {
		t.Errorf("point west of the square: %v, want about %v", d, want)
	}
	line := `{"type":"LineString","coordinates":[[0,-1],[0,1]]}`
	d = scalarNum(t, `ST_DISTANCE({"type":"Point","coordinates":[1,0]}, `+line+`)`)
	if math.Abs(d-111319.49) > 1 {
		t.Errorf("point east of a meridian line: %v", d)
	}
}

// ST_AREA is the area on the WGS-84 ellipsoid in square meters: the
// service's documented answer to a millionth; a hole is taken away; a
// clockwise ring encloses the rest of the earth.
func TestSTAreaIsTheEllipsoidsArea(t *testing.T) {
	box := `{"type":"Polygon","coordinates":[[[31.8,-5],[32,-5],[32,-4.7],[31.8,-4.7],[31.8,-5]]]}`
	got := scalarNum(t, `ST_AREA(`+box+`)`)
	if want := 735970283.0522614; math.Abs(got-want) > 1e-6*want {
		t.Errorf("documented box: %.4f, want %.4f", got, want)
	}
	// The northern hemisphere: half the ellipsoid's 510,065,621.7 km².
	north := `{"type":"Polygon","coordinates":[[[0,0],[90,0],[180,0],[-90,0],[0,0]]]}`
	got = scalarNum(t, `ST_AREA(`+north+`)`)
	if want := 510065621724088.4 / 2; math.Abs(got-want) > 1e-6*want {
		t.Errorf("hemisphere: %.1f, want %.1f", got, want)
	}
	holed := `{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]],[[0.5,0.5],[0.5,1.5],[1.5,1.5],[1.5,0.5],[0.5,0.5]]]}`
	outer := scalarNum(t, `ST_AREA({"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]]]})`)
	hole := scalarNum(t, `ST_AREA({"type":"Polygon","coordinates":[[[0.5,0.5],[1.5,0.5],[1.5,1.5],[0.5,1.5],[0.5,0.5]]]})`)
	if got := scalarNum(t, `ST_AREA(`+holed+`)`); math.Abs(got-(outer-hole)) > 1 {
		t.Errorf("holed: %v, want %v", got, outer-hole)
	}
	multi := `{"type":"MultiPolygon","coordinates":[[[[31.8,-5],[32,-5],[32,-4.7],[31.8,-4.7],[31.8,-5]]],[[[0.5,0.5],[1.5,0.5],[1.5,1.5],[0.5,1.5],[0.5,0.5]]]]}`
	if got := scalarNum(t, `ST_AREA(`+multi+`)`); math.Abs(got-(735970283.0522614+hole)) > 10 {
		t.Errorf("multipolygon: %v", got)
	}
	cw := `{"type":"Polygon","coordinates":[[[31.8,-5],[31.8,-4.7],[32,-4.7],[32,-5],[31.8,-5]]]}`
	if got := scalarNum(t, `ST_AREA(`+cw+`)`); math.Abs(got-(510065621724088.4-735970283.0522614)) > 1e-6*got {
		t.Errorf("clockwise box: %v", got)
	}
	if got := scalar(t, `ST_AREA({"type":"Point","coordinates":[1,1]})`); got != "0" {
		t.Errorf("a point's area: %s", got)
	}
}

// ST_WITHIN and ST_INTERSECTS decide containment on the sphere: holes are
// outside, a polygon across the antimeridian holds the points across it, a
// clockwise ring holds what lies outside it.
func TestSTWithinAndIntersectsOnTheSphere(t *testing.T) {
	pt := func(lon, lat string) string { return `{"type":"Point","coordinates":[` + lon + `,` + lat + `]}` }
	holed := `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[1,3],[3,3],[3,1],[1,1]]]}`
	holedCCW := `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[3,1],[3,3],[1,3],[1,1]]]}`
	anti := `{"type":"Polygon","coordinates":[[[179,-1],[-179,-1],[-179,1],[179,1],[179,-1]]]}`
	cw := `{"type":"Polygon","coordinates":[[[0,0],[0,1],[1,1],[1,0],[0,0]]]}`
	multi := `{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,1],[0,0]]],[[[10,10],[11,10],[11,11],[10,11],[10,10]]]]}`
	tests := []struct {
		expr string
		want string
	}{
		{`ST_WITHIN(` + pt("0.5", "0.5") + `, ` + holed + `)`, "true"},
		{`ST_WITHIN(` + pt("2", "2") + `, ` + holed + `)`, "false"},    // in the hole
		{`ST_WITHIN(` + pt("2", "2") + `, ` + holedCCW + `)`, "false"}, // in a hole walked the other way
		{`ST_WITHIN(` + pt("0.5", "0.5") + `, ` + holedCCW + `)`, "true"},
		{`ST_WITHIN(` + pt("5", "2") + `, ` + holed + `)`, "false"},
		{`ST_WITHIN(` + pt("179.5", "0") + `, ` + anti + `)`, "true"},
		{`ST_WITHIN(` + pt("-179.5", "0.5") + `, ` + anti + `)`, "true"},
		{`ST_WITHIN(` + pt("0", "0.5") + `, ` + anti + `)`, "false"},
		{`ST_WITHIN(` + pt("0.5", "0.5") + `, ` + cw + `)`, "false"},
		{`ST_WITHIN(` + pt("50", "50") + `, ` + cw + `)`, "true"},
		{`ST_WITHIN(` + pt("10.5", "10.5") + `, ` + multi + `)`, "true"},
		{`ST_WITHIN(` + pt("5", "5") + `, ` + multi + `)`, "false"},
		{`ST_WITHIN({"type":"LineString","coordinates":[[0.2,0.2],[0.8,0.8]]}, ` + multi + `)`, "true"},
		{`ST_WITHIN({"type":"LineString","coordinates":[[0.5,2],[3.5,2]]}, ` + holed + `)`, "false"}, // through the hole
		{`ST_WITHIN({"type":"Polygon","coordinates":[[[0.1,0.1],[0.9,0.1],[0.9,0.9],[0.1,0.9],[0.1,0.1]]]}, ` + holed + `)`, "true"},
		{`ST_WITHIN({"type":"Polygon","coordinates":[[[0.5,0.5],[3.5,0.5],[3.5,3.5],[0.5,3.5],[0.5,0.5]]]}, ` + holed + `)`, "false"}, // around the hole
		{`ST_INTERSECTS({"type":"LineString","coordinates":[[-1,0.5],[5,0.5]]}, ` + holed + `)`, "true"},
		{`ST_INTERSECTS({"type":"LineString","coordinates":[[1.5,1.5],[2.5,2.5]]}, ` + holed + `)`, "false"}, // inside the hole
		{`ST_INTERSECTS({"type":"Polygon","coordinates":[[[3,3],[6,3],[6,6],[3,6],[3,3]]]}, ` + holed + `)`, "true"},
		{`ST_INTERSECTS({"type":"Polygon","coordinates":[[[5,5],[6,5],[6,6],[5,6],[5,5]]]}, ` + holed + `)`, "false"},
		{`ST_INTERSECTS(` + pt("1", "0") + `, {"type":"LineString","coordinates":[[0,0],[2,0]]})`, "true"},
		{`ST_INTERSECTS(` + pt("0.5", "0.5") + `, ` + pt("0.5", "0.5") + `)`, "true"},
		// Not GeoJSON, or not valid: undefined.
		{`ST_WITHIN(5, ` + holed + `)`, ""},
		{`ST_WITHIN(` + pt("0.5", "95") + `, ` + holed + `)`, ""},
		{`ST_DISTANCE(` + pt("100", "100") + `, ` + pt("0", "0") + `)`, ""},
	}
	for _, tc := range tests {
		if got := scalar(t, tc.expr); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// ST_ISVALID and ST_ISVALIDDETAILED say what is wrong with a geometry in
// the service's words.
func TestSTIsValidDetailedGivesTheReason(t *testing.T) {
	tests := []struct{ geo, want string }{
		{`{"type":"Point","coordinates":[-84.38876194345323,33.75682784306348]}`, `{"valid":true}`},
		{`{"type":"Point","coordinates":[133.75682784306348,-184.38876194345323]}`, `{"valid":false,"reason":"Latitude values must be between -90 and 90 degrees."}`},
		{`{"type":"Point","coordinates":[200,0]}`, `{"valid":false,"reason":"Longitude values must be between -180 and 180 degrees."}`},
		{`{"type":"Polygon","coordinates":[[[31.8,-5],[31.8,-4.7],[32,-4.7],[32,-5]]]}`, `{"valid":false,"reason":"The Polygon input is not valid because the start and end points of the ring number 1 are not the same. Each ring of a polygon must have the same start and end points."}`},
		{`{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}`, `{"valid":false,"reason":"The Polygon input is not valid because the ring number 1 intersects itself or another ring."}`},
		{`{"type":"LineString","coordinates":[[0,0]]}`, `{"valid":false,"reason":"The LineString input is not valid because it does not have enough points. A LineString must have at least two points."}`},
		{`{"type":"Circle","coordinates":[0,0]}`, `{"valid":false,"reason":"The GeoJSON type 'Circle' is not supported: it must be Point, LineString, Polygon or MultiPolygon."}`},
	}
	for _, tc := range tests {
		if got := scalar(t, `ST_ISVALIDDETAILED(`+tc.geo+`)`); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.geo, got, tc.want)
		}
		want := "false"
		if strings.Contains(tc.want, `"valid":true`) {
			want = "true"
		}
		if got := scalar(t, `ST_ISVALID(`+tc.geo+`)`); got != want {
			t.Errorf("ST_ISVALID(%s) = %s", tc.geo, got)
		}
	}
	if got := scalar(t, `ST_ISVALID("Point")`); got != "" {
		t.Errorf("ST_ISVALID of a string: %q, want undefined", got)
	}
}

// The spatial functions filter and order: WHERE ST_DISTANCE(...) < r and
// ORDER BY ST_DISTANCE as the service evaluates them.
func TestSpatialFunctionsFilterAndOrder(t *testing.T) {
	docs := []string{
		`{"id":"near","loc":{"type":"Point","coordinates":[20,20]}}`,
		`{"id":"far","loc":{"type":"Point","coordinates":[100,10]}}`,
		`{"id":"bad","loc":{"type":"Point","coordinates":[100,100]}}`,
		`{"id":"mid","loc":{"type":"Point","coordinates":[21,20]}}`,
	}
	rows := run(t, `SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, {'type': 'Point', 'coordinates': [20.1, 20]}) < 20000`, docs, Options{})
	if strings.Join(rows, ",") != `"near"` {
		t.Errorf("within 20 km: %v", rows)
	}
	rows = run(t, `SELECT c.id, ST_DISTANCE(c.loc, {'type': 'Point', 'coordinates': [20.1, 20]}) AS d FROM c WHERE ST_ISVALID(c.loc) AND ST_DISTANCE(c.loc, {'type': 'Point', 'coordinates': [20.1, 20]}) > 20000`, docs, Options{})
	if len(rows) != 2 || !strings.HasPrefix(rows[0], `{"id":"far","d":`) || !strings.HasPrefix(rows[1], `{"id":"mid","d":`) {
		t.Errorf("distances selected: %v", rows)
	}
	// The service sorts by property paths only: ORDER BY a distance is
	// refused with its message.
	_, err := Parse(`SELECT VALUE c.id FROM c ORDER BY ST_DISTANCE(c.loc, {'type': 'Point', 'coordinates': [20.1, 20]})`)
	if err == nil || !strings.Contains(err.Error(), "ORDER BY item expression could not be mapped to a document path") {
		t.Errorf("ORDER BY ST_DISTANCE: %v", err)
	}
}

// The plan lists the spatial conjuncts an index can serve, and their
// regions hold every geometry the functions can match.
func TestPlanListsSpatialFilters(t *testing.T) {
	q, err := Parse(`SELECT * FROM c WHERE c.kind = 'shop' AND ST_DISTANCE(c.loc, {'type':'Point','coordinates':[20.1,20]}) < 20000 AND ST_WITHIN(c.loc, @area) AND ST_INTERSECTS({'type':'Point','coordinates':[1,1]}, c.a.b) AND ST_WITHIN(@pt, c.zone)`)
	if err != nil {
		t.Fatal(err)
	}
	area := json.RawMessage(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}`)
	p, err := q.Plan(map[string]json.RawMessage{"@area": area, "@pt": json.RawMessage(`{"type":"Point","coordinates":[5,5]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.Spatial {
		got = append(got, strings.Join(f.Path, ".")+" "+f.Op.String())
	}
	if strings.Join(got, ", ") != "loc ST_DISTANCE, loc ST_WITHIN, a.b ST_INTERSECTS, zone ST_WITHIN" {
		t.Fatalf("spatial filters: %v", got)
	}
	if p.Spatial[0].Distance != 20000 || p.Spatial[3].Op != SpatialContains {
		t.Errorf("filters: %+v", p.Spatial)
	}
	// The distance region holds the points within 20 km, and not far ones.
	box, ok := p.Spatial[0].Region()
	if !ok {
		t.Fatal("no region")
	}
	in := func(lon, lat float64) bool {
		return lon >= box.West && lon <= box.East && lat >= box.South && lat <= box.North
	}
	for _, az := range []float64{0, 45, 90, 135, 180, 225, 270, 315} {
		p := geodesicDirect(lonLat{20.1, 20}, az*deg, 19999)
		if !in(p.lon, p.lat) {
			t.Errorf("a point 19,999 m away at %v° lies outside %+v", az, box)
		}
	}
	if in(20.1, 20.5) || in(21, 20) {
		t.Errorf("the region %+v is wider than 20 km", box)
	}
	// A polygon around the north pole reaches it at every longitude; one
	// across the antimeridian spans them all.
	polar, _ := GeoBounds(json.RawMessage(`{"type":"Polygon","coordinates":[[[0,80],[90,80],[180,80],[-90,80],[0,80]]]}`))
	if polar.North != 90 || polar.West != -180 || polar.East != 180 || polar.South > 80 {
		t.Errorf("polar box: %+v", polar)
	}
	anti, _ := GeoBounds(json.RawMessage(`{"type":"Polygon","coordinates":[[[179,-1],[-179,-1],[-179,1],[179,1],[179,-1]]]}`))
	if anti.West != -180 || anti.East != 180 {
		t.Errorf("antimeridian box: %+v", anti)
	}
	// An edge along a parallel bulges toward the pole.
	line, _ := GeoBounds(json.RawMessage(`{"type":"LineString","coordinates":[[0,60],[40,60]]}`))
	if line.North < 61 {
		t.Errorf("the edge's bulge is missing: %+v", line)
	}
}

// BenchmarkSTDistanceFilter evaluates WHERE ST_DISTANCE(...) < r over
// documents with points; BenchmarkSTWithinPolygon ST_WITHIN of a 64-vertex
// polygon with a hole.
func BenchmarkSTDistanceFilter(b *testing.B) {
	benchSpatial(b, `SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, {'type':'Point','coordinates':[20.1,20]}) < 200000`)
}

func BenchmarkSTWithinPolygon(b *testing.B) {
	var ring, hole []string
	for i := range 64 {
		a := float64(i) / 64 * 2 * math.Pi
		ring = append(ring, fmt.Sprintf("[%g,%g]", 20+3*math.Cos(a), 20+3*math.Sin(a)))
		hole = append(hole, fmt.Sprintf("[%g,%g]", 20+math.Cos(-a), 20+math.Sin(-a)))
	}
	ring, hole = append(ring, ring[0]), append(hole, hole[0])
	poly := `{'type':'Polygon','coordinates':[[` + strings.Join(ring, ",") + `],[` + strings.Join(hole, ",") + `]]}`
	benchSpatial(b, `SELECT VALUE c.id FROM c WHERE ST_WITHIN(c.loc, `+poly+`)`)
}

func benchSpatial(b *testing.B, q string) {
	docs := make([]string, 1000)
	for i := range docs {
		docs[i] = fmt.Sprintf(`{"id":"%d","loc":{"type":"Point","coordinates":[%g,%g]}}`, i, 15+float64(i%100)/10, 15+float64(i/100))
	}
	parsed, err := Parse(q)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := parsed.Execute(docsOf(docs...), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/doc")
}

// In a Geometry container the functions compute on the plane: distances
// and areas in the coordinates' units, coordinates without range, rings
// bounding their region whichever way they are walked.
func TestSpatialFunctionsOnThePlane(t *testing.T) {
	planar := func(expr string) string {
		t.Helper()
		rows := run(t, "SELECT VALUE "+expr+" FROM c", []string{`{"id":"x"}`}, Options{PlanarSpatial: true})
		if len(rows) == 0 {
			return ""
		}
		return rows[0]
	}
	holed := `{"type":"Polygon","coordinates":[[[0,0],[400,0],[400,400],[0,400],[0,0]],[[100,100],[100,300],[300,300],[300,100],[100,100]]]}`
	cw := `{"type":"Polygon","coordinates":[[[0,0],[0,10],[10,10],[10,0],[0,0]]]}`
	tests := []struct{ expr, want string }{
		{`ST_DISTANCE({"type":"Point","coordinates":[0,0]}, {"type":"Point","coordinates":[300,400]})`, "500"},
		{`ST_DISTANCE({"type":"Point","coordinates":[500,200]}, ` + holed + `)`, "100"},
		{`ST_DISTANCE({"type":"Point","coordinates":[200,200]}, ` + holed + `)`, "100"}, // in the hole
		{`ST_DISTANCE({"type":"Point","coordinates":[50,50]}, ` + holed + `)`, "0"},
		{`ST_AREA(` + holed + `)`, "120000"},
		{`ST_AREA(` + cw + `)`, "100"},
		{`ST_WITHIN({"type":"Point","coordinates":[5,5]}, ` + cw + `)`, "true"},
		{`ST_WITHIN({"type":"Point","coordinates":[200,200]}, ` + holed + `)`, "false"},
		{`ST_WITHIN({"type":"LineString","coordinates":[[10,10],[90,390]]}, ` + holed + `)`, "true"},
		{`ST_WITHIN({"type":"LineString","coordinates":[[10,200],[390,200]]}, ` + holed + `)`, "false"},
		{`ST_INTERSECTS({"type":"LineString","coordinates":[[-10,5],[5,5]]}, ` + cw + `)`, "true"},
		{`ST_INTERSECTS({"type":"LineString","coordinates":[[150,150],[250,250]]}, ` + holed + `)`, "false"},
		{`ST_ISVALID({"type":"Point","coordinates":[1000,-1000]})`, "true"},
		{`ST_ISVALIDDETAILED({"type":"Polygon","coordinates":[[[0,0],[10,10],[10,0],[0,10],[0,0]]]})`, `{"valid":false,"reason":"The Polygon input is not valid because the ring number 1 intersects itself or another ring."}`},
	}
	for _, tc := range tests {
		if got := planar(tc.expr); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
		}
	}
	// The same point is not valid on the sphere.
	if got := scalar(t, `ST_ISVALID({"type":"Point","coordinates":[1000,-1000]})`); got != "false" {
		t.Errorf("on the sphere: %s", got)
	}
}
