package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// Administrative calls live under /_admin/, outside the Cosmos REST API:
// operations the service performs on its own that tests want to provoke.
//
//	POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split
//
// splits partition key range {id} in two and answers 200 with the children
// in the pkranges feed's shape. It needs the master key, signed as a POST on
// the range itself: resource type "pkranges", resource link
// "dbs/{db}/colls/{coll}/pkranges/{id}" (Sign(key, "POST", "pkranges", link,
// date)). A read-only key or resource token gets 403; a range that is not
// current 410/1002.

// adminPrefix is the first path segment of administrative calls.
const adminPrefix = "_admin"

// serveAdmin authenticates and answers an administrative call; segs are the
// path segments after adminPrefix.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request, segs []string) error {
	ctx := r.Context()
	if len(segs) != 7 || segs[0] != "dbs" || segs[2] != "colls" || segs[4] != "pkranges" || segs[6] != "split" {
		return engine.NotFound("The administrative path %q names no operation: use POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split.", r.URL.Path)
	}
	cred, aerr := s.keys.authenticate(r, segs[:6], s.now())
	if aerr != nil {
		return aerr
	}
	if cred.tok != nil || cred.aad != "" || cred.key != accessAll {
		return engine.Forbidden("Administrative calls need the master key.")
	}
	if r.Method != http.MethodPost {
		return methodNotAllowed(r)
	}
	req := &request{Request: r, w: w, segs: segs[:6]}
	c, err := s.eng.Container(ctx, segs[1], segs[3])
	if err != nil {
		return err
	}
	children, err := s.eng.SplitPartitionKeyRange(ctx, segs[1], segs[3], segs[5])
	if err != nil {
		return err
	}
	all, _ := c.PartitionKeyRanges()
	n := len(all) + 1
	docs := make([][]byte, len(children))
	for i := range children {
		docs[i] = partitionKeyRangeJSON(c, &children[i], n)
	}
	s.log.Info("split partition key range", "db", segs[1], "coll", segs[3], "range", segs[5],
		"children", children[0].ID+","+children[1].ID)
	req.writeFeed(c.RID, "PartitionKeyRanges", docs, "", 1)
	return nil
}
