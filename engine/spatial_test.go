package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

// randomGeometry returns a GeoJSON geometry: mostly points, some small
// polygons and lines, some near the poles and across the antimeridian, some
// not valid.
func randomGeometry(rng *rand.Rand) string {
	lon := func() float64 { return rng.Float64()*360 - 180 }
	lat := func() float64 { return rng.Float64()*180 - 90 }
	switch rng.IntN(10) {
	case 0:
		x, y := lon(), lat()*0.9
		d := rng.Float64() * 3
		return fmt.Sprintf(`{"type":"Polygon","coordinates":[[[%g,%g],[%g,%g],[%g,%g],[%g,%g],[%g,%g]]]}`, x, y, x+d, y, x+d, y+d, x, y+d, x, y)
	case 1:
		return fmt.Sprintf(`{"type":"LineString","coordinates":[[%g,%g],[%g,%g]]}`, lon(), lat(), lon(), lat())
	case 2:
		return fmt.Sprintf(`{"type":"Point","coordinates":[%g,%g]}`, 179.5+rng.Float64()*0.5*float64(1-2*rng.IntN(2)), rng.Float64()*2-1)
	case 3:
		return fmt.Sprintf(`{"type":"Point","coordinates":[%g,%g]}`, lon(), 89+rng.Float64())
	case 4:
		return `{"type":"Point","coordinates":[100,100]}`
	case 5:
		return `{"type":"Polygon","coordinates":[[[0,80],[90,80],[180,80],[-90,80],[0,80]]]}`
	}
	// Clustered around a few places, so that small radii find some.
	c := [][2]float64{{20, 20}, {-122.1, 47.6}, {179.9, 0}, {0, 0}}[rng.IntN(4)]
	return fmt.Sprintf(`{"type":"Point","coordinates":[%g,%g]}`, c[0]+rng.NormFloat64()*0.3, c[1]+rng.NormFloat64()*0.3)
}

// TestSpatialIndexAnswersMatchFullScans writes, replaces and deletes items
// with geometries in a container with a spatial index and in one without
// any index, and checks that every spatial query pages to the same results
// from the index as from a scan, each item once.
func TestSpatialIndexAnswersMatchFullScans(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"ix","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"spatialIndexes":[{"path":"/loc/?","types":["Point","Polygon","LineString"]},{"path":"/area/*","types":["Polygon"]}]}}`), nil); err != nil {
		t.Fatal(err)
	}
	e.CreateContainer(ctx, "db", []byte(`{"id":"scan","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`), nil)
	rng := rand.New(rand.NewPCG(5, 6))
	write := func(id int) {
		doc := fmt.Sprintf(`{"id":"%d","pk":"p%d","loc":%s,"area":{"zone":%s}}`, id, id%3, randomGeometry(rng), randomGeometry(rng))
		for _, c := range []string{"ix", "scan"} {
			if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: c, Body: []byte(doc)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 600 {
		write(rng.IntN(250))
		if rng.IntN(10) == 0 {
			id := rng.IntN(250)
			for _, c := range []string{"ix", "scan"} {
				e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: c, ID: fmt.Sprint(id), PartitionKey: StringKey(fmt.Sprintf("p%d", id%3)), HasPartitionKey: true})
			}
		}
	}
	queries := []string{
		"SELECT c.id FROM c WHERE ST_DISTANCE(c.loc, @g) < @r",
		"SELECT c.id FROM c WHERE @r >= ST_DISTANCE(@g, c.loc)",
		"SELECT c.id FROM c WHERE ST_WITHIN(c.loc, @poly)",
		"SELECT c.id FROM c WHERE ST_INTERSECTS(c.loc, @poly)",
		"SELECT c.id FROM c WHERE ST_INTERSECTS(@poly, c.area.zone)",
		"SELECT c.id FROM c WHERE ST_WITHIN(@g, c.loc)",
		"SELECT VALUE COUNT(1) FROM c WHERE ST_DISTANCE(c.loc, @g) <= @r",
	}
	var scanned, indexed int64
	for i := range 120 {
		center := randomGeometry(rng)
		if i%3 == 0 {
			center = `{"type":"Point","coordinates":[20,20]}`
		}
		var pt struct{ Coordinates []float64 }
		json.Unmarshal([]byte(center), &pt)
		x, y := 20.0, 20.0
		if len(pt.Coordinates) == 2 && pt.Coordinates[1] <= 90 {
			x, y = pt.Coordinates[0], pt.Coordinates[1]
		}
		d := []float64{0.5, 2, 10, 60}[rng.IntN(4)]
		poly := fmt.Sprintf(`{"type":"Polygon","coordinates":[[[%g,%g],[%g,%g],[%g,%g],[%g,%g],[%g,%g]]]}`, x-d, y-d, x+d, y-d, x+d, y+d, x-d, y+d, x-d, y-d)
		r := []float64{1000, 30000, 200000, 3e6}[rng.IntN(4)]
		params := map[string]json.RawMessage{"@g": json.RawMessage(center), "@poly": json.RawMessage(poly), "@r": json.RawMessage(fmt.Sprint(r))}
		q := queries[i%len(queries)]
		run := func(c string, pageSize int) ([]string, int64) {
			req := &QueryRequest{Database: "db", Container: c, Query: q, Params: params, MaxItems: pageSize, SinglePartitionKeyRange: true}
			var out []string
			var retrieved int64
			for {
				res, err := e.QueryItems(context.Background(), req)
				if err != nil {
					t.Fatalf("%s %s: %v", c, q, err)
				}
				for _, it := range res.Items {
					out = append(out, string(it))
				}
				retrieved += res.Metrics.RetrievedDocumentCount
				if res.Continuation == "" {
					break
				}
				req.Continuation = res.Continuation
			}
			slices.Sort(out)
			return out, retrieved
		}
		got, _ := run("ix", 5)
		want, _ := run("scan", 5)
		if !slices.Equal(got, want) {
			t.Fatalf("%s with %s, r %v, %s:\nindex %v\nscan  %v", q, center, r, poly, got, want)
		}
		// What one page of everything reads (the index's candidates are
		// read again for each page, to put them in creation order).
		_, n1 := run("ix", 1000)
		_, n2 := run("scan", 1000)
		indexed += n1
		scanned += n2
	}
	// The index narrows: fewer documents read than the scans read.
	if indexed*2 > scanned {
		t.Errorf("the spatial index read %d documents, the scans %d", indexed, scanned)
	}
	t.Logf("spatial queries read %d documents through the index, %d by scanning", indexed, scanned)
}

// A query with a spatial filter on an indexed path reports the spatial
// index among the utilized ones; without a spatial index it reads every
// item.
func TestSpatialIndexIsUsedAndReported(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"legacy","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":"/\"Location\"/?","indexes":[{"kind":"Spatial","dataType":"Point"}]},{"path":"/"}]}}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"plain","partitionKey":{"paths":["/pk"]}}`), nil)
	for i := range 50 {
		doc := fmt.Sprintf(`{"id":"%d","pk":"p","n":%d,"Location":{"type":"Point","coordinates":[%d,%d]}}`, i, i, i, i%80)
		for _, c := range []string{"legacy", "plain"} {
			if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: c, Body: []byte(doc)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := "SELECT c.id FROM c WHERE ST_DISTANCE(c.Location, {'type': 'Point', 'coordinates': [20.1, 20]}) < 20000"
	for _, tc := range []struct {
		container string
		read      int64
	}{{"legacy", 1}, {"plain", 50}} {
		res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: tc.container, Query: q, SinglePartitionKeyRange: true, IndexMetrics: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 1 || !strings.Contains(string(res.Items[0]), `"20"`) {
			t.Fatalf("%s: %s", tc.container, res.Items)
		}
		if res.Metrics.RetrievedDocumentCount != tc.read {
			t.Errorf("%s: read %d documents, want %d", tc.container, res.Metrics.RetrievedDocumentCount, tc.read)
		}
		used := false
		for _, u := range res.IndexUtilization.UtilizedSingle {
			used = used || u.Spec == "/Location/?" && strings.Contains(u.Filter, "ST_DISTANCE")
		}
		if used != (tc.container == "legacy") {
			t.Errorf("%s: utilized %+v", tc.container, res.IndexUtilization.UtilizedSingle)
		}
	}
	// The legacy included path "/" indexes every property, as "/*" does.
	res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "legacy", Query: "SELECT c.id FROM c WHERE c.n = 7", SinglePartitionKeyRange: true})
	if err != nil || len(res.Items) != 1 || res.Metrics.RetrievedDocumentCount != 1 {
		t.Errorf("c.n = 7 under the path \"/\": %v, read %d documents", err, res.Metrics.RetrievedDocumentCount)
	}
}

// The spatial parts of a container are validated as the service validates
// them: a Geometry container's spatial index needs a boundingBox, a
// Geography container's takes none.
func TestSpatialPolicyIsValidated(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	ix := func(extra string) string {
		return `"spatialIndexes":[{"path":"/location/?","types":["Point"]` + extra + `}]`
	}
	bbox := `,"boundingBox":{"xmin":0,"ymin":0,"xmax":100,"ymax":100}`
	tests := []struct {
		name, body string
		refused    []string // words the 400 holds; nil: created
	}{
		{"geography", `"indexingPolicy":{` + ix("") + `},"geospatialConfig":{"type":"Geography"}`, nil},
		{"geometry-bbox", `"indexingPolicy":{` + ix(bbox) + `},"geospatialConfig":{"type":"Geometry"}`, nil},
		{"geometry-nobox", `"indexingPolicy":{` + ix("") + `},"geospatialConfig":{"type":"Geometry"}`, []string{"boundingBox", "Geometry"}},
		{"geography-bbox", `"indexingPolicy":{` + ix(bbox) + `},"geospatialConfig":{"type":"Geography"}`, []string{"boundingBox", "Geography"}},
		{"default-bbox", `"indexingPolicy":{` + ix(bbox) + `}`, []string{"boundingBox", "Geography"}},
		{"bad-type", `"indexingPolicy":{"spatialIndexes":[{"path":"/l/?","types":["Circle"]}]}`, []string{"Circle"}},
		{"bad-config", `"geospatialConfig":{"type":"Flat"}`, []string{"Flat", "Geography or Geometry"}},
		{"empty-box", `"indexingPolicy":{` + ix(`,"boundingBox":{"xmin":5,"ymin":0,"xmax":5,"ymax":1}`) + `},"geospatialConfig":{"type":"Geometry"}`, []string{"xmin must be below xmax"}},
	}
	for _, tc := range tests {
		res, err := e.CreateContainer(ctx, "db", []byte(`{"id":"`+tc.name+`","partitionKey":{"paths":["/id"]},`+tc.body+`}`), nil)
		if tc.refused == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if !strings.Contains(string(res.Body), `"spatialIndexes":[{`) {
				t.Errorf("%s: the spatial index is not kept: %s", tc.name, res.Body)
			}
			continue
		}
		var ee *Error
		if !errors.As(err, &ee) || ee.Status != 400 {
			t.Errorf("%s: %v, want a 400", tc.name, err)
			continue
		}
		for _, w := range tc.refused {
			if !strings.Contains(ee.Message, w) {
				t.Errorf("%s: %q lacks %q", tc.name, ee.Message, w)
			}
		}
	}
	// A replace that leaves geospatialConfig out keeps Geometry.
	if _, err := e.ReplaceContainer(ctx, "db", "geometry-bbox", []byte(`{"id":"geometry-bbox","partitionKey":{"paths":["/id"]},"indexingPolicy":{`+ix(bbox)+`}}`), ""); err != nil {
		t.Fatalf("replace without geospatialConfig: %v", err)
	}
	r, _ := e.ReadContainer(ctx, "db", "geometry-bbox")
	if !strings.Contains(string(r.Body), `"geospatialConfig":{"type":"Geometry"}`) {
		t.Errorf("after the replace: %s", r.Body)
	}
}

// A Geometry container's queries compute on the plane, in its coordinates'
// units, over coordinates no longitude or latitude could hold.
func TestGeometryContainerQueriesOnThePlane(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"plan","partitionKey":{"paths":["/pk"]},"geospatialConfig":{"type":"Geometry"},
		"indexingPolicy":{"spatialIndexes":[{"path":"/at/?","types":["Point"],"boundingBox":{"xmin":0,"ymin":0,"xmax":1000,"ymax":1000}}]}}`), nil); err != nil {
		t.Fatal(err)
	}
	for i, xy := range [][2]int{{300, 400}, {600, 800}, {900, 120}} {
		doc := fmt.Sprintf(`{"id":"%d","pk":"p","at":{"type":"Point","coordinates":[%d,%d]}}`, i, xy[0], xy[1])
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "plan", Body: []byte(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "plan", SinglePartitionKeyRange: true,
		Query: "SELECT c.id, ST_DISTANCE(c.at, {'type':'Point','coordinates':[0,0]}) AS d FROM c WHERE ST_DISTANCE(c.at, {'type':'Point','coordinates':[0,0]}) < 950"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range res.Items {
		got = append(got, string(it))
	}
	if strings.Join(got, ",") != `{"id":"0","d":500},{"id":"2","d":907.9647570252932}` {
		t.Errorf("on the plane: %v", got)
	}
}

// TestSpatialEntriesWrittenByTheFormat4Upgrade: a store of index format 3
// (before spatial entries) whose container already declared a spatial
// index is rebuilt at Open, and its spatial queries find the items again.
func TestSpatialEntriesWrittenByTheFormat4Upgrade(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"spatialIndexes":[{"path":"/loc/?","types":["Point"]}]}}`), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p","loc":{"type":"Point","coordinates":[%d,%d]}}`, i, i, i))
	}
	c, _ := e.Container(ctx, "db", "c")
	q := `SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, {'type':'Point','coordinates':[3,3]}) < 100000`
	want := queryIDs(t, e, "c", q)
	spatial := keysUnder(t, store, append(keys.IndexPrefix(c.rid), 0))
	if len(spatial) != 20 || !slices.Equal(want, []string{"3"}) {
		t.Fatalf("%d spatial entries, query %v", len(spatial), want)
	}
	e.Close()
	// As format 3 left it: no spatial entries.
	b := store.NewBatch()
	for _, k := range spatial {
		b.Delete([]byte(k))
	}
	b.Set(keys.MetaIndexFormat, binary.BigEndian.AppendUint64(nil, 3))
	e = commitAndReopen(t, store, b)
	if got := keysUnder(t, store, append(keys.IndexPrefix(c.rid), 0)); !slices.Equal(got, spatial) {
		t.Errorf("after the upgrade: %d spatial entries, want %d", len(got), len(spatial))
	}
	if got := queryIDs(t, e, "c", q); !slices.Equal(got, want) {
		t.Errorf("after the upgrade: %v, want %v", got, want)
	}
}
