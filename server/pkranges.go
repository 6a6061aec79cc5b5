package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// pkRangesETag versions the partition key ranges of a container. Orrery
// serves one range that never splits, so the version never changes.
const pkRangesETag = `"1"`

// partitionKeyRanges serves /dbs/{db}/colls/{coll}/pkranges, plainly or as
// the incremental feed the Go SDK's routing cache reads until it gets 304.
func (s *Server) partitionKeyRanges(r *request) error {
	c, err := s.eng.Container(r.t.db, r.t.coll)
	if err != nil {
		return err
	}
	incremental := strings.EqualFold(r.Header.Get("A-IM"), "Incremental Feed")
	if incremental && r.ifNoneMatch() == pkRangesETag {
		r.writeJSON(http.StatusNotModified, nil, pkRangesETag, 1)
		return nil
	}
	rangeRID := engine.PartitionKeyRangeRID(c)
	doc := `{"_rid":"` + rangeRID + `","id":"0","_etag":"\"00000000-0000-0000-0000-000000000000\"",` +
		`"minInclusive":"","maxExclusive":"FF","ridPrefix":0,"_self":"` + c.Self() + `pkranges/` + rangeRID + `/",` +
		`"throughputFraction":1,"status":"online","parents":[],"_ts":0,"lsn":0}`
	r.w.Header().Set("etag", pkRangesETag)
	r.writeFeed(c.RID, "PartitionKeyRanges", [][]byte{[]byte(doc)}, "", 1)
	return nil
}

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

// partitionKeyRange reports whether the request names a partition key range
// (x-ms-documentdb-partitionkeyrangeid). Orrery publishes one range, "0"; any
// other id is gone (410/1002), which makes the SDKs refresh their routing.
func (r *request) partitionKeyRange() (bool, error) {
	id := r.Header.Get("x-ms-documentdb-partitionkeyrangeid")
	if id == "" {
		return false, nil
	}
	if id != "0" {
		return false, &engine.Error{Status: 410, SubStatus: 1002, Code: "Gone",
			Message: "The partition key range " + id + " does not exist: this container has one range, 0."}
	}
	return true, nil
}
