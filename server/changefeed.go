package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// changeFeed serves GET /dbs/{db}/colls/{coll}/docs with an A-IM header: a
// page of the change feed, or 304 with the continuation ETag when there is
// nothing new.
//
// The container comes from the engine's cache: on a shared store the
// page's own first round trip checks the catalog, and reads the session
// token.
func (s *Server) changeFeed(r *request) error {
	ctx := r.Context()
	c, err := s.itemContainerOf(r)
	if err != nil {
		return err
	}
	req := &engine.ChangeFeedRequest{Database: c.Database().ID, Container: c.ID,
		MinEPK: header(r.Header, "X-Ms-Start-Epk"), MaxEPK: header(r.Header, "X-Ms-End-Epk"),
		PartitionKeyRangeID: r.partitionKeyRangeID()}
	switch aim := header(r.Header, "A-Im"); {
	case strings.EqualFold(aim, "Incremental Feed"):
		req.Mode = engine.LatestVersion
	case strings.EqualFold(aim, "Full-Fidelity Feed"):
		req.Mode = engine.AllVersionsAndDeletes
	default:
		return badRequest("The A-IM header %q is not a change feed mode: use \"Incremental Feed\" or \"Full-Fidelity Feed\".", aim)
	}
	if req.PartitionKey, req.HasPartitionKey, err = r.partitionKey(); err != nil {
		return err
	}
	if req.MaxItems, err = r.maxItemCount(); err != nil {
		return err
	}
	switch inm := r.ifNoneMatch(); inm {
	case "":
	case "*":
		req.FromNow = true
	default:
		req.Continuation = inm
	}
	if v := header(r.Header, "If-Modified-Since"); v != "" {
		if req.Since, err = parseHTTPTime(v); err != nil {
			return badRequest("The If-Modified-Since header %q is not an HTTP date.", v)
		}
	}
	if req.Mode == engine.AllVersionsAndDeletes && req.Continuation == "" && !req.FromNow && req.Since.IsZero() && c.KeepsAllVersions() {
		// The service keeps all versions and deletes for the container's
		// retention period only, and refuses to start from the beginning
		// (a container that keeps none is told so by the engine).
		return badRequest("The all versions and deletes change feed mode cannot start from the beginning: it keeps the changes of the container's " +
			"changeFeedPolicy retention period only. Start from now or from a continuation token. You must read the change feed from within the retention period.")
	}
	res, err := s.eng.ReadChangeFeed(ctx, req)
	if err != nil {
		return err
	}
	if cur, cerr := s.eng.CachedContainer(ctx, c.Database().ID, c.ID); cerr == nil && cur != c {
		// The page found the cache stale and reloaded it.
		c = cur
		r.setContentPath(c)
	}
	if err := s.setSessionLSN(r, res.SessionLSN); err != nil {
		return err
	}
	if id := r.partitionKeyRangeID(); id != "" {
		// The service names the range a page came from; the JavaScript
		// SDK's own suite reads it to see ranges iterated breadth first.
		r.w.Header().Set("X-Ms-Documentdb-Partitionkeyrangeid", id)
	}
	if res.NotModified {
		r.writeJSON(http.StatusNotModified, nil, res.ETag, res.Charge)
		return nil
	}
	r.w.Header().Set("Etag", res.ETag)
	r.writeFeed(c.RID, "Documents", res.Items, "", res.Charge)
	return nil
}

// parseHTTPTime parses an HTTP date. The Go SDK formats it as RFC 1123 in
// UTC, which names the zone "UTC" rather than HTTP's "GMT".
func parseHTTPTime(v string) (time.Time, error) {
	if t, err := http.ParseTime(v); err == nil {
		return t, nil
	}
	var err error
	for _, layout := range []string{time.RFC1123, time.RFC1123Z} {
		var t time.Time
		if t, err = time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}
