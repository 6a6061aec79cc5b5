package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// deleteAllItemsByPartitionKey serves POST
// /dbs/{db}/colls/{coll}/operations/partitionkeydelete: every item of the
// logical partition (or hierarchical key prefix) in the partition key header
// is deleted. The service answers before its background deletion ends; here
// the items are gone when the answer comes.
func (s *Server) deleteAllItemsByPartitionKey(r *request) error {
	ctx := r.Context()
	if _, err := s.containerOf(r); err != nil {
		return err
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	if !hasPK {
		return engine.BadRequest("PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header.")
	}
	n, err := s.eng.DeleteAllItemsByPartitionKey(ctx, r.t.db, r.t.coll, pk)
	if err != nil {
		return err
	}
	// A charge like deleting each item, as the service bills the background work.
	r.writeJSON(http.StatusOK, nil, "", max(1, float64(n)*5.71))
	return nil
}
