package compat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/orrerytest"
)

// TestGoSDKSpatialQueriesUseTheSpatialIndex: through the Go SDK, a
// container created with a spatial index answers ST_DISTANCE, ST_WITHIN
// and ST_INTERSECTS with the service's geography (cities within a radius,
// a polygon with a hole), reports the spatial index as utilized, and finds
// an item again after it moves.
func TestGoSDKSpatialQueriesUseTheSpatialIndex(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "geo"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Client.NewDatabase("geo")
	_, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     "cities",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/country"}},
		IndexingPolicy: &azcosmos.IndexingPolicy{
			Automatic: true, IndexingMode: azcosmos.IndexingModeConsistent,
			IncludedPaths:  []azcosmos.IncludedPath{{Path: "/*"}},
			SpatialIndexes: []azcosmos.SpatialIndex{{Path: "/loc/?", SpatialTypes: []azcosmos.SpatialType{azcosmos.SpatialTypePoint}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewContainer("cities")
	cities := []struct {
		id, country string
		lon, lat    float64
	}{
		{"paris", "FR", 2.3522, 48.8566}, {"versailles", "FR", 2.1301, 48.8049}, {"lyon", "FR", 4.8357, 45.7640},
		{"london", "GB", -0.1276, 51.5072}, {"brussels", "BE", 4.3517, 50.8503}, {"new-york", "US", -74.0060, 40.7128},
		{"fiji", "FJ", 179.9, -17.0}, {"samoa", "WS", -179.9, -17.0},
	}
	for _, ct := range cities {
		doc := fmt.Sprintf(`{"id":%q,"country":%q,"loc":{"type":"Point","coordinates":[%g,%g]}}`, ct.id, ct.country, ct.lon, ct.lat)
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(ct.country), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
	query := func(q string, params []azcosmos.QueryParameter, pk azcosmos.PartitionKey, metrics bool) ([]string, string) {
		t.Helper()
		pager := c.NewQueryItemsPager(q, pk, &azcosmos.QueryOptions{QueryParameters: params, PopulateIndexMetrics: metrics})
		var ids []string
		var ix string
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			for _, it := range page.Items {
				var v string
				if err := json.Unmarshal(it, &v); err != nil {
					t.Fatalf("%s: %s", q, it)
				}
				ids = append(ids, v)
			}
			if page.IndexMetrics != nil {
				ix = *page.IndexMetrics
			}
		}
		slices.Sort(ids)
		return ids, ix
	}
	paris := []azcosmos.QueryParameter{{Name: "@p", Value: map[string]any{"type": "Point", "coordinates": []float64{2.3522, 48.8566}}}}
	// Versailles is 17 km from Paris, Brussels 264 km, London 344 km, Lyon 392 km.
	for r, want := range map[float64]string{20000: "paris,versailles", 300000: "brussels,paris,versailles", 350000: "brussels,london,paris,versailles"} {
		got, _ := query("SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, @p) < @r", append(paris, azcosmos.QueryParameter{Name: "@r", Value: r}), azcosmos.NewPartitionKey(), false)
		if strings.Join(got, ",") != want {
			t.Errorf("within %v m of Paris: %v, want %s", r, got, want)
		}
	}
	// The distance in meters, on the ellipsoid: Paris–London 343.9 km.
	pager := c.NewQueryItemsPager("SELECT VALUE ST_DISTANCE(c.loc, @p) FROM c WHERE c.id = 'london'", azcosmos.NewPartitionKeyString("GB"), &azcosmos.QueryOptions{QueryParameters: paris})
	page, err := pager.NextPage(ctx)
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("distance: %v %v", err, page.Items)
	}
	var meters float64
	json.Unmarshal(page.Items[0], &meters)
	if math.Abs(meters-343900) > 1000 {
		t.Errorf("Paris–London: %v m", meters)
	}
	// A polygon around France with a hole around Paris (rings: the outer
	// counterclockwise, the hole clockwise), scoped to one partition, with
	// index metrics.
	france := map[string]any{"type": "Polygon", "coordinates": [][][]float64{
		{{-5, 42}, {8, 42}, {8, 51}, {-5, 51}, {-5, 42}},
		{{2, 48.5}, {2, 49.2}, {2.6, 49.2}, {2.6, 48.5}, {2, 48.5}},
	}}
	got, ix := query("SELECT VALUE c.id FROM c WHERE ST_WITHIN(c.loc, @area)", []azcosmos.QueryParameter{{Name: "@area", Value: france}}, azcosmos.NewPartitionKeyString("FR"), true)
	if strings.Join(got, ",") != "lyon" {
		t.Errorf("within France but outside Paris: %v", got)
	}
	// The header is base64 of the JSON, as the service sends it.
	decoded, _ := base64.StdEncoding.DecodeString(ix)
	if !strings.Contains(string(decoded), `"IndexSpec":"/loc/?"`) {
		t.Errorf("the spatial index is not reported as utilized: %s", ix)
	}
	// A box across the antimeridian holds Fiji and Samoa.
	pacific := map[string]any{"type": "Polygon", "coordinates": [][][]float64{{{179, -18}, {-179, -18}, {-179, -16}, {179, -16}, {179, -18}}}}
	got, _ = query("SELECT VALUE c.id FROM c WHERE ST_INTERSECTS(@area, c.loc)", []azcosmos.QueryParameter{{Name: "@area", Value: pacific}}, azcosmos.NewPartitionKey(), false)
	if strings.Join(got, ",") != "fiji,samoa" {
		t.Errorf("across the antimeridian: %v", got)
	}
	// Lyon moves next to Paris: the index follows the replace.
	if _, err := c.ReplaceItem(ctx, azcosmos.NewPartitionKeyString("FR"), "lyon", []byte(`{"id":"lyon","country":"FR","loc":{"type":"Point","coordinates":[2.36,48.86]}}`), nil); err != nil {
		t.Fatal(err)
	}
	got, _ = query("SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, @p) < 20000", paris, azcosmos.NewPartitionKey(), false)
	if strings.Join(got, ",") != "lyon,paris,versailles" {
		t.Errorf("after the move: %v", got)
	}
	// ORDER BY a distance is refused as the service refuses it.
	_, err = c.NewQueryItemsPager("SELECT VALUE c.id FROM c ORDER BY ST_DISTANCE(c.loc, @p)", azcosmos.NewPartitionKeyString("FR"), &azcosmos.QueryOptions{QueryParameters: paris}).NextPage(ctx)
	wantRefused(t, "ORDER BY ST_DISTANCE", err, http.StatusBadRequest, "could not be mapped to a document path")
}
