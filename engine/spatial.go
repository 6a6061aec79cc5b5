package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/geocell"
	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// The spatial index keeps, for every valid GeoJSON geometry at a path of
// the indexing policy's spatialIndexes (or an included path with a legacy
// index of kind Spatial), one entry per cell of its covering:
//
//	I<coll rid 8>0x00<path len uvarint><path><cell 9><item key suffix>
//
// where the cell is written as the property index writes a number, a type
// byte then its 8 bytes, so that the entries' item keys are read the same
// way. A point is under its deepest cell. One entry per geometry means a
// scan meets each item once, at the price of a small shape across a large
// cell's edge being listed under that large cell. The entries are written
// in the item's batch, with its property entries, by index.go (below
// this file: the queries here read what index.go writes).
//
// A query whose WHERE implies ST_DISTANCE(path, constant) < r, ST_WITHIN
// or ST_INTERSECTS of the path and a constant (query.Plan.Spatial) reads
// the entries of the cells that meet the region the constant and r span:
// a range per cell of the region's covering for the items' cells inside
// it, and one lookup per ancestor for the larger cells of large items.
// The query is then evaluated in full on those candidates.

// spatialQueryCells is how many cells at most cover a query's region (the
// service's account configuration says maxSpatialQueryCells 12; Orrery's
// cells are coarser).
const spatialQueryCells = 16

// planarSpatial reports whether the container's geospatialConfig type is
// Geometry: its spatial functions compute on the plane, and its geometries
// are not in the index's cells of longitude and latitude (it scans).
func (c *Container) planarSpatial() bool {
	gc, _ := c.record.Props["geospatialConfig"].(map[string]any)
	t, _ := gc["type"].(string)
	return t == "Geometry"
}

// chooseSpatialIndex returns the spatial index entries that hold every item
// a spatial filter of the plan can match, or false.
func (c *Container) chooseSpatialIndex(plan *query.Plan) (*indexSource, []IndexUse, bool) {
	if c.index == nil || c.index.None || c.index.Spatial == nil || c.indexRetired.Load() || c.planarSpatial() {
		return nil, nil, false
	}
	for _, f := range plan.Spatial {
		path := indexpolicy.Path(f.Path)
		if !c.index.Spatial.Covers(path) {
			continue
		}
		region, ok := f.Region()
		if !ok || (region.East-region.West)*(region.North-region.South) > 360*180/4 {
			continue // a quarter of the map or more: a scan reads no more
		}
		prefix := keys.SpatialIndexPathPrefix(c.rid, path)
		at := func(cell geocell.ID) []byte { return appendSpatialEntry(nil, prefix, cell, nil) }
		var ranges []keyRange
		for _, cell := range geocell.Cover(geocell.Box(region), spatialQueryCells) {
			lo, hi := cell.Range()
			ranges = append(ranges, keyRange{at(lo), storage.PrefixEnd(at(hi))})
			for _, a := range cell.Ancestors() {
				ranges = append(ranges, keyRange{at(a), storage.PrefixEnd(at(a))})
			}
		}
		ranges = mergeRanges(ranges)
		return &indexSource{ranges: ranges, base: len(prefix)}, []IndexUse{{Spec: path + "/?", Filter: spatialFilterText(f)}}, true
	}
	return nil, nil, false
}

// mergeRanges sorts key ranges and joins those that overlap or touch.
func mergeRanges(rs []keyRange) []keyRange {
	slices.SortFunc(rs, func(a, b keyRange) int { return bytes.Compare(a.lower, b.lower) })
	var out []keyRange
	for _, r := range rs {
		if n := len(out); n > 0 && bytes.Compare(r.lower, out[n-1].upper) <= 0 {
			if bytes.Compare(r.upper, out[n-1].upper) > 0 {
				out[n-1].upper = r.upper
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// spatialFilterText renders a spatial filter as the index metrics name it.
func spatialFilterText(f query.SpatialFilter) string {
	p := "ROOT." + strings.Join(f.Path, ".")
	switch f.Op {
	case query.SpatialDistance:
		d, _ := json.Marshal(f.Distance)
		return "(ST_DISTANCE(" + p + ", " + string(f.Geometry) + ") <= " + string(d) + ")"
	case query.SpatialContains:
		return "ST_WITHIN(" + string(f.Geometry) + ", " + p + ")"
	}
	return f.Op.String() + "(" + p + ", " + string(f.Geometry) + ")"
}

// validateSpatialPolicy refuses the spatial parts of a container the service
// refuses: a geospatialConfig type other than Geography or Geometry, a
// spatial index that is not {"path", "types"} with known types, a Geometry
// container's index without a boundingBox or a Geography container's with
// one. A replace that leaves geospatialConfig out keeps the container's.
func validateSpatialPolicy(out map[string]any, prev *Container) *Error {
	gc, ok := out["geospatialConfig"]
	if (!ok || gc == nil) && prev != nil {
		if old, ok := prev.record.Props["geospatialConfig"]; ok {
			out["geospatialConfig"], gc = old, old
		}
	}
	geoType := "Geography"
	if gc != nil {
		m, ok := gc.(map[string]any)
		if !ok {
			return BadRequest("The geospatialConfig must be a JSON object such as {\"type\": \"Geography\"}, not %s.", policyValue(gc))
		}
		t, _ := m["type"].(string)
		switch {
		case strings.EqualFold(t, "Geography"):
			geoType = "Geography"
		case strings.EqualFold(t, "Geometry"):
			geoType = "Geometry"
		default:
			return BadRequest("The geospatialConfig type %s is invalid: it must be Geography or Geometry.", policyValue(m["type"]))
		}
		m["type"] = geoType
	}
	ip, _ := out["indexingPolicy"].(map[string]any)
	raw, ok := ip["spatialIndexes"]
	if !ok || raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return BadRequest("The indexing policy's spatialIndexes must be a list of {\"path\", \"types\"} objects, not %s.", policyValue(raw))
	}
	for i, e := range list {
		si, ok := e.(map[string]any)
		if !ok {
			return BadRequest("The indexing policy's spatialIndexes[%d] must be an object with a path and types, not %s.", i, policyValue(e))
		}
		p, ok := si["path"].(string)
		if !ok {
			return BadRequest("The spatial index path %s in spatialIndexes[%d] could not be accepted: it must be a string such as \"/location/?\".", policyValue(si["path"]), i)
		}
		if at := badIndexPath(p); at >= 0 {
			return BadRequest("The spatial index path '%s' could not be accepted, failed near position %d. Please ensure that the path is a valid path. Common errors include invalid characters or absence of quotes around labels.", p, at)
		}
		if t, ok := si["types"]; ok && t != nil {
			types, ok := t.([]any)
			if !ok {
				return BadRequest("The types of the spatial index on '%s' must be a list of Point, LineString, Polygon or MultiPolygon.", p)
			}
			for _, x := range types {
				switch s, _ := x.(string); s {
				case "Point", "LineString", "Polygon", "MultiPolygon":
				default:
					return BadRequest("The spatial type %s of the spatial index on '%s' is invalid: it must be Point, LineString, Polygon or MultiPolygon.", policyValue(x), p)
				}
			}
		}
		bb, has := si["boundingBox"]
		has = has && bb != nil
		switch {
		case geoType == "Geometry" && !has:
			return BadRequest("The spatial index on '%s' needs a boundingBox: a container whose geospatialConfig type is Geometry indexes its geometries within a bounding box {xmin, ymin, xmax, ymax}.", p)
		case geoType == "Geography" && has:
			return BadRequest("The spatial index on '%s' has a boundingBox, which a container whose geospatialConfig type is Geography does not take: only Geometry indexes are bounded.", p)
		case has:
			box, ok := bb.(map[string]any)
			var v [4]float64
			for j, name := range []string{"xmin", "ymin", "xmax", "ymax"} {
				f, isNum := box[name].(float64)
				if !ok || !isNum {
					return BadRequest("The boundingBox of the spatial index on '%s' must give the numbers xmin, ymin, xmax and ymax.", p)
				}
				v[j] = f
			}
			if v[0] >= v[2] || v[1] >= v[3] {
				return BadRequest("The boundingBox of the spatial index on '%s' is empty: xmin must be below xmax and ymin below ymax.", p)
			}
		}
	}
	return nil
}
