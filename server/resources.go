package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// databases serves /dbs: create (POST), list (GET) and query (POST query).
func (s *Server) databases(r *request) error {
	switch {
	case r.Method == http.MethodPost && r.isQuery():
		return s.queryResources(r, "", "Databases", s.eng.ListDatabases())
	case r.Method == http.MethodPost:
		t, err := r.throughput()
		if err != nil {
			return err
		}
		res, err := s.eng.CreateDatabase(r.body, t)
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
		return nil
	case r.Method == http.MethodGet:
		return s.readResourceFeed(r, "Databases", s.eng.ListDatabases())
	}
	return methodNotAllowed(r)
}

// database serves /dbs/{db}: read (GET) and delete (DELETE).
func (s *Server) database(r *request, name string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err := s.eng.ReadDatabase(name)
		if err != nil {
			return err
		}
		return r.writeResource(res)
	case http.MethodDelete:
		if err := s.eng.DeleteDatabase(name, r.ifMatch()); err != nil {
			return err
		}
		r.writeJSON(http.StatusNoContent, nil, "", 1)
		return nil
	}
	return methodNotAllowed(r)
}

// containers serves /dbs/{db}/colls: create, list and query.
func (s *Server) containers(r *request, db string) error {
	switch {
	case r.Method == http.MethodPost && r.isQuery():
		list, err := s.eng.ListContainers(db)
		if err != nil {
			return err
		}
		return s.queryResources(r, "", "DocumentCollections", list)
	case r.Method == http.MethodPost:
		t, err := r.throughput()
		if err != nil {
			return err
		}
		res, err := s.eng.CreateContainer(db, r.body, t)
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
		return nil
	case r.Method == http.MethodGet:
		list, err := s.eng.ListContainers(db)
		if err != nil {
			return err
		}
		return s.readResourceFeed(r, "DocumentCollections", list)
	}
	return methodNotAllowed(r)
}

// readResourceFeed answers a read feed (GET) of resources listed by id one
// page at a time: x-ms-max-item-count sizes the page and x-ms-continuation
// resumes after the last id of the previous one.
func (s *Server) readResourceFeed(r *request, key string, list []*engine.Resource) error {
	n, err := r.maxItemCount()
	if err != nil {
		return err
	}
	res, err := engine.PageResources(list, n, r.Header.Get("x-ms-continuation"))
	if err != nil {
		return err
	}
	r.writeFeed("", key, rawItems(res.Items), res.Continuation, res.Charge)
	return nil
}

// container serves /dbs/{db}/colls/{coll}: read, replace and delete.
func (s *Server) container(r *request, db, coll string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err := s.eng.ReadContainer(db, coll)
		if err != nil {
			return err
		}
		return r.writeResource(res)
	case http.MethodPut:
		res, err := s.eng.ReplaceContainer(db, coll, r.body, r.ifMatch())
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
		return nil
	case http.MethodDelete:
		if err := s.eng.DeleteContainer(db, coll, r.ifMatch()); err != nil {
			return err
		}
		r.writeJSON(http.StatusNoContent, nil, "", 1)
		return nil
	}
	return methodNotAllowed(r)
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

// offers serves /offers and /offers/{rid}: list, query, read and replace.
func (s *Server) offers(r *request) error {
	if len(r.segs) == 1 {
		switch {
		case r.Method == http.MethodPost && r.isQuery():
			return s.queryResources(r, "", "Offers", s.eng.ListOffers())
		case r.Method == http.MethodGet:
			r.writeFeed("", "Offers", resourceBodies(s.eng.ListOffers()), "", 1)
			return nil
		}
		return methodNotAllowed(r)
	}
	if len(r.segs) != 2 {
		return unknownPath(r)
	}
	switch r.Method {
	case http.MethodGet:
		res, err := s.eng.ReadOffer(r.segs[1])
		if err != nil {
			return err
		}
		return r.writeResource(res)
	case http.MethodPut:
		res, err := s.eng.ReplaceOffer(r.segs[1], r.body)
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
		return nil
	}
	return methodNotAllowed(r)
}
