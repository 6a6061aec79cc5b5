package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// pkRangesETag is the version of a container's partition key ranges as the
// pkranges feed reports it: "<n>", one more after every split.
func pkRangesETag(version uint64) string { return `"` + strconv.FormatUint(version, 10) + `"` }

// partitionKeyRanges serves /dbs/{db}/colls/{coll}/pkranges, plainly or as
// the incremental feed the Go SDK's routing cache reads until it gets 304:
// with the etag of an earlier version it answers the ranges made since (the
// children of splits, whose parents tell the client which ranges are gone),
// with the current one 304.
func (s *Server) partitionKeyRanges(r *request) error {
	ctx := r.Context()
	c, err := s.eng.Container(ctx, r.t.db, r.t.coll)
	if err != nil {
		return err
	}
	ranges, version := c.PartitionKeyRanges()
	etag := pkRangesETag(version)
	since := uint64(0)
	if strings.EqualFold(header(r.Header, "A-Im"), "Incremental Feed") {
		inm := strings.Trim(strings.TrimPrefix(r.ifNoneMatch(), "W/"), `"`)
		if v, perr := strconv.ParseUint(inm, 10, 64); perr == nil && v <= version {
			since = v
		}
		if since == version {
			r.writeJSON(http.StatusNotModified, nil, etag, 1)
			return nil
		}
	}
	docs := make([][]byte, 0, len(ranges))
	for i := range ranges {
		if ranges[i].Version > since {
			docs = append(docs, partitionKeyRangeJSON(c, &ranges[i], len(ranges)))
		}
	}
	r.w.Header().Set("Etag", etag)
	r.writeFeed(c.RID, "PartitionKeyRanges", docs, "", 1)
	return nil
}

// partitionKeyRangeJSON renders a range as the service does.
func partitionKeyRangeJSON(c *engine.Container, pr *engine.PartitionKeyRange, n int) []byte {
	rid := c.PartitionKeyRangeRID(pr.ID)
	b := make([]byte, 0, 384)
	b = append(b, `{"_rid":"`...)
	b = append(b, rid...)
	b = append(b, `","id":`...)
	b = strconv.AppendQuote(b, pr.ID)
	b = append(b, `,"_etag":"\"00000000-0000-0000-0000-`...)
	b = append(b, padVersion(pr.Version)...)
	b = append(b, `\"","minInclusive":`...)
	b = strconv.AppendQuote(b, pr.MinInclusive)
	b = append(b, `,"maxExclusive":`...)
	b = strconv.AppendQuote(b, pr.MaxExclusive)
	b = append(b, `,"ridPrefix":`...)
	b = append(b, pr.ID...)
	b = append(b, `,"_self":"`...)
	b = append(b, c.Self()...)
	b = append(b, "pkranges/"...)
	b = append(b, rid...)
	b = append(b, `/","throughputFraction":`...)
	b = strconv.AppendFloat(b, 1/float64(n), 'g', -1, 64)
	b = append(b, `,"status":"online","parents":[`...)
	for i, p := range pr.Parents {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, p)
	}
	b = append(b, `],"_ts":`...)
	b = strconv.AppendInt(b, pr.TS, 10)
	b = append(b, `,"lsn":`...)
	b = strconv.AppendUint(b, pr.LSN, 10)
	return append(b, '}')
}

// padVersion renders a range version as the last group of a GUID-shaped etag.
func padVersion(v uint64) string {
	s := strconv.FormatUint(v, 16)
	return strings.Repeat("0", max(12-len(s), 0)) + s
}

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

// partitionKeyRangeID returns the partition key range a request is scoped to
// (x-ms-documentdb-partitionkeyrangeid), "" when none. The engine answers
// 410/1002 for a range the container no longer has, which makes the SDKs
// refresh their routing.
func (r *request) partitionKeyRangeID() string {
	return strings.TrimSpace(header(r.Header, "X-Ms-Documentdb-Partitionkeyrangeid"))
}
