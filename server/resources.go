package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/orrery-db/orrery/engine"
)

// listDatabases answers GET /dbs.
func (s *Server) listDatabases(r *request) error {
	ctx := r.Context()
	if err := s.eng.CatalogCurrent(ctx); err != nil {
		return err
	}
	return s.readResourceFeed(r, "Databases", s.eng.ListDatabases(ctx))
}

// queryDatabases answers a query POSTed to /dbs.
func (s *Server) queryDatabases(r *request) error {
	ctx := r.Context()
	if err := s.eng.CatalogCurrent(ctx); err != nil {
		return err
	}
	return s.queryResources(r, "", "Databases", s.eng.ListDatabases(ctx))
}

// createDatabase serves POST /dbs.
func (s *Server) createDatabase(r *request) error {
	ctx := r.Context()
	t, err := r.throughput()
	if err != nil {
		return err
	}
	res, err := s.eng.CreateDatabase(ctx, r.body, t)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
	return nil
}

// readDatabase serves GET /dbs/{db}.
func (s *Server) readDatabase(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReadDatabase(ctx, r.t.db)
	if err != nil {
		return err
	}
	return r.writeResource(res)
}

// deleteDatabase serves DELETE /dbs/{db}.
func (s *Server) deleteDatabase(r *request) error {
	ctx := r.Context()
	if err := s.eng.DeleteDatabase(ctx, r.t.db, r.ifMatch()); err != nil {
		return err
	}
	r.writeJSON(http.StatusNoContent, nil, "", 1)
	return nil
}

// listContainers answers GET /dbs/{db}/colls.
func (s *Server) listContainers(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListContainers(ctx, r.t.db)
	if err != nil {
		return err
	}
	return s.readResourceFeed(r, "DocumentCollections", list)
}

// queryContainers answers a query POSTed to /dbs/{db}/colls.
func (s *Server) queryContainers(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListContainers(ctx, r.t.db)
	if err != nil {
		return err
	}
	return s.queryResources(r, "", "DocumentCollections", list)
}

// createContainer serves POST /dbs/{db}/colls.
func (s *Server) createContainer(r *request) error {
	ctx := r.Context()
	t, err := r.throughput()
	if err != nil {
		return err
	}
	body, err := legacyContainerBody(r)
	if err != nil {
		return err
	}
	res, err := s.eng.CreateContainer(ctx, r.t.db, body, t)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
	return nil
}

// partitionedContainersVersion is the first API version whose containers
// must name a partition key.
const partitionedContainersVersion = "2018-12-31"

// legacyContainerBody returns the body of a container create. A client on
// an API version before 2018-12-31 that names no partition key creates a
// non-partitioned container, as on the service: its definition is the
// system key /_partitionKey, which the SDKs read to address its one
// partition (the JS SDK with [], the others with the undefined key).
func legacyContainerBody(r *request) ([]byte, error) {
	v := header(r.Header, "X-Ms-Version")
	if v == "" || v >= partitionedContainersVersion {
		return r.body, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &props); err != nil {
		return r.body, nil // the engine reports the malformed body
	}
	if pk, ok := props["partitionKey"]; ok && string(pk) != "null" {
		return r.body, nil
	}
	props["partitionKey"] = json.RawMessage(`{"paths":["/_partitionKey"],"kind":"Hash","systemKey":true}`)
	return json.Marshal(props)
}

// readResourceFeed answers a read feed (GET) of resources listed by id one
// page at a time: x-ms-max-item-count sizes the page and x-ms-continuation
// resumes after the last id of the previous one.
func (s *Server) readResourceFeed(r *request, key string, list []*engine.Resource) error {
	n, err := r.maxItemCount()
	if err != nil {
		return err
	}
	res, err := engine.PageResources(list, n, header(r.Header, "X-Ms-Continuation"))
	if err != nil {
		return err
	}
	r.writeFeed("", key, rawItems(res.Items), res.Continuation, res.Charge)
	return nil
}

// readContainer serves GET /dbs/{db}/colls/{coll}.
func (s *Server) readContainer(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReadContainer(ctx, r.t.db, r.t.coll)
	if err != nil {
		return err
	}
	if headerBool(r.Header, "X-Ms-Documentdb-Populatequotainfo") {
		// A new indexing policy is applied before its replace returns: the
		// index transformation is always complete.
		r.w.Header().Set("X-Ms-Documentdb-Collection-Index-Transformation-Progress", "100")
		if err := s.writeQuotaHeaders(ctx, r); err != nil {
			return err
		}
	}
	return r.writeResource(res)
}

// replaceContainer serves PUT /dbs/{db}/colls/{coll}.
func (s *Server) replaceContainer(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReplaceContainer(ctx, r.t.db, r.t.coll, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}

// deleteContainer serves DELETE /dbs/{db}/colls/{coll}.
func (s *Server) deleteContainer(r *request) error {
	ctx := r.Context()
	if err := s.eng.DeleteContainer(ctx, r.t.db, r.t.coll, r.ifMatch()); err != nil {
		return err
	}
	r.writeJSON(http.StatusNoContent, nil, "", 1)
	return nil
}

// writeResource answers a read, or 304 when If-None-Match still matches.
func (r *request) writeResource(res *engine.Resource) error {
	if inm := r.ifNoneMatch(); inm != "" && (inm == "*" || inm == res.ETag) {
		r.writeJSON(http.StatusNotModified, nil, res.ETag, 1)
		return nil
	}
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}

func resourceBodies(list []*engine.Resource) [][]byte {
	out := make([][]byte, len(list))
	for i, r := range list {
		out[i] = r.Body
	}
	return out
}

// listOffers answers GET /offers.
func (s *Server) listOffers(r *request) error {
	ctx := r.Context()
	if err := s.eng.CatalogCurrent(ctx); err != nil {
		return err
	}
	r.writeFeed("", "Offers", resourceBodies(s.eng.ListOffers(ctx)), "", 1)
	return nil
}

// queryOffers answers a query POSTed to /offers.
func (s *Server) queryOffers(r *request) error {
	ctx := r.Context()
	if err := s.eng.CatalogCurrent(ctx); err != nil {
		return err
	}
	return s.queryResources(r, "", "Offers", s.eng.ListOffers(ctx))
}

// readOffer serves GET /offers/{rid}.
func (s *Server) readOffer(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReadOffer(ctx, r.t.id)
	if err != nil {
		return err
	}
	offerHeaders(r, res)
	return r.writeResource(res)
}

// offerHeaders are the headers the service sends with an offer: a replace
// here takes effect at once, and the minimum is the service's (of the
// autoscale maximum for an autoscale offer).
func offerHeaders(r *request, res *engine.Resource) {
	r.w.Header().Set("X-Ms-Offer-Replace-Pending", "false")
	r.w.Header().Set("X-Ms-Cosmos-Min-Throughput", strconv.Itoa(engine.MinThroughput(res)))
}

// replaceOffer serves PUT /offers/{rid}.
func (s *Server) replaceOffer(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReplaceOffer(ctx, r.t.id, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	offerHeaders(r, res)
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}
