package server

import (
	"context"
	"fmt"

	"github.com/orrery-db/orrery/engine"
)

// Per-container quotas reported by x-ms-resource-quota, as the service
// reports them: script counts, and sizes in KB (collectionSize is the
// service's 10 GB of one physical partition). documentsCount -1 is no limit.
const (
	quotaFunctions        = 25
	quotaStoredProcedures = 100
	quotaTriggers         = 25
	collectionSizeKB      = 10 * 1024 * 1024
)

// writeQuotaHeaders sets x-ms-resource-quota and x-ms-resource-usage of a
// container read that asked for them (x-ms-documentdb-populatequotainfo).
// The usage counts the container's scripts and walks its items once: the
// service answers from statistics it keeps, Orrery keeps none, and the
// header is only sent when asked for.
func (s *Server) writeQuotaHeaders(ctx context.Context, r *request) error {
	counts := map[engine.ScriptKind]int{}
	for _, kind := range []engine.ScriptKind{engine.UserFunctions, engine.StoredProcedures, engine.Triggers} {
		list, err := s.eng.ListScripts(ctx, r.t.db, r.t.coll, kind)
		if err != nil {
			return err
		}
		counts[kind] = len(list)
	}
	docs, bytes := 0, 0
	req := &engine.QueryRequest{Database: r.t.db, Container: r.t.coll, Query: "SELECT * FROM c", MaxItems: 1000}
	for {
		page, err := s.eng.QueryItems(ctx, req)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			docs++
			bytes += len(it)
		}
		if page.Continuation == "" {
			break
		}
		req.Continuation = page.Continuation
	}
	kb := (bytes + 1023) / 1024
	h := r.w.Header()
	h.Set("X-Ms-Resource-Quota", fmt.Sprintf("functions=%d;storedProcedures=%d;triggers=%d;documentSize=%d;documentsSize=%d;documentsCount=-1;collectionSize=%d;",
		quotaFunctions, quotaStoredProcedures, quotaTriggers, engine.MaxItemBytes/1024, collectionSizeKB, collectionSizeKB))
	h.Set("X-Ms-Resource-Usage", fmt.Sprintf("functions=%d;storedProcedures=%d;triggers=%d;documentSize=0;documentsSize=%d;documentsCount=%d;collectionSize=%d;",
		counts[engine.UserFunctions], counts[engine.StoredProcedures], counts[engine.Triggers], kb, docs, kb))
	return nil
}
