package server

import (
	"net/http"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// usersPath serves everything under /dbs/{db}/users; rest is the path
// after "users".
func (s *Server) usersPath(r *request, db string, rest []string) error {
	switch {
	case len(rest) == 0:
		return s.users(r, db)
	case len(rest) == 1:
		return s.user(r, db, rest[0])
	case rest[1] != "permissions":
		return unknownPath(r)
	case len(rest) == 2:
		return s.permissions(r, db, rest[0])
	case len(rest) == 3:
		return s.permission(r, db, rest[0], rest[2])
	}
	return unknownPath(r)
}

// users serves /dbs/{db}/users: create, upsert, list and query.
func (s *Server) users(r *request, db string) error {
	switch {
	case r.Method == http.MethodPost && r.isQuery():
		list, err := s.eng.ListUsers(db)
		if err != nil {
			return err
		}
		return s.queryResources(r, "", "Users", list)
	case r.Method == http.MethodPost && headerBool(r.Header, "x-ms-documentdb-is-upsert"):
		res, created, err := s.eng.UpsertUser(db, r.body)
		if err != nil {
			return err
		}
		r.writeJSON(createdOrOK(created), res.Body, res.ETag, 1)
		return nil
	case r.Method == http.MethodPost:
		res, err := s.eng.CreateUser(db, r.body)
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
		return nil
	case r.Method == http.MethodGet:
		list, err := s.eng.ListUsers(db)
		if err != nil {
			return err
		}
		return s.readResourceFeed(r, "Users", list)
	}
	return methodNotAllowed(r)
}

// user serves /dbs/{db}/users/{id}: read, replace and delete.
func (s *Server) user(r *request, db, id string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err := s.eng.ReadUser(db, id)
		if err != nil {
			return err
		}
		return r.writeResource(res)
	case http.MethodPut:
		res, err := s.eng.ReplaceUser(db, id, r.body, r.ifMatch())
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
		return nil
	case http.MethodDelete:
		if err := s.eng.DeleteUser(db, id, r.ifMatch()); err != nil {
			return err
		}
		r.writeJSON(http.StatusNoContent, nil, "", 1)
		return nil
	}
	return methodNotAllowed(r)
}

// tokenExpiry checks that r may obtain resource tokens and returns when
// those it gets expire.
func (s *Server) tokenExpiry(r *request) (time.Time, error) {
	if err := r.mayMintTokens(); err != nil {
		return time.Time{}, err
	}
	lifetime, err := tokenLifetime(r.Header)
	if err != nil {
		return time.Time{}, err
	}
	return s.now().Add(lifetime), nil
}

// permissions serves /dbs/{db}/users/{user}/permissions: create, upsert,
// list and query. Every permission returned carries a fresh _token.
func (s *Server) permissions(r *request, db, user string) error {
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	switch {
	case r.Method == http.MethodPost && r.isQuery(), r.Method == http.MethodGet:
		list, err := s.eng.ListPermissions(db, user)
		if err != nil {
			return err
		}
		withTokens := make([]*engine.Resource, len(list))
		for i, p := range list {
			if withTokens[i], err = s.tokenized(p, expiry); err != nil {
				return err
			}
		}
		if r.Method == http.MethodGet {
			return s.readResourceFeed(r, "Permissions", withTokens)
		}
		return s.queryResources(r, "", "Permissions", withTokens)
	case r.Method == http.MethodPost:
		var p *engine.Permission
		created := true
		if headerBool(r.Header, "x-ms-documentdb-is-upsert") {
			p, created, err = s.eng.UpsertPermission(db, user, r.body)
		} else {
			p, err = s.eng.CreatePermission(db, user, r.body)
		}
		if err != nil {
			return err
		}
		return s.writePermission(r, createdOrOK(created), p, expiry)
	}
	return methodNotAllowed(r)
}

// permission serves /dbs/{db}/users/{user}/permissions/{id}: read, replace
// and delete.
func (s *Server) permission(r *request, db, user, id string) error {
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p, err := s.eng.ReadPermission(db, user, id)
		if err != nil {
			return err
		}
		if inm := r.ifNoneMatch(); inm != "" && (inm == "*" || inm == p.ETag) {
			r.writeJSON(http.StatusNotModified, nil, p.ETag, 1)
			return nil
		}
		return s.writePermission(r, http.StatusOK, p, expiry)
	case http.MethodPut:
		p, err := s.eng.ReplacePermission(db, user, id, r.body, r.ifMatch())
		if err != nil {
			return err
		}
		return s.writePermission(r, http.StatusOK, p, expiry)
	case http.MethodDelete:
		if err := s.eng.DeletePermission(db, user, id, r.ifMatch()); err != nil {
			return err
		}
		r.writeJSON(http.StatusNoContent, nil, "", 1)
		return nil
	}
	return methodNotAllowed(r)
}

// mayMintTokens refuses permission requests signed with the read-only key:
// the tokens they return could grant writes.
func (r *request) mayMintTokens() error {
	if r.access != accessAll {
		return engine.Forbidden("Permissions carry resource tokens, which only the master key may obtain: sign permission requests with the master key.")
	}
	return nil
}

func (s *Server) writePermission(r *request, status int, p *engine.Permission, expiry time.Time) error {
	res, err := s.tokenized(p, expiry)
	if err != nil {
		return err
	}
	r.writeJSON(status, res.Body, res.ETag, 1)
	return nil
}

// tokenized returns a permission's resource with a resource token valid
// until expiry in its _token property.
func (s *Server) tokenized(p *engine.Permission, expiry time.Time) (*engine.Resource, error) {
	tok, err := s.keys.mintResourceToken(p.RID, expiry)
	if err != nil {
		return nil, err
	}
	body := p.Body
	if len(body) < 2 || body[len(body)-1] != '}' {
		return nil, &engine.Error{Status: 500, Code: "InternalServerError", Message: "A stored permission is not a JSON object."}
	}
	// The token's characters (base64url, '&', '=', '.') need no JSON escaping.
	out := make([]byte, 0, len(body)+len(tok)+16)
	out = append(out, body[:len(body)-1]...)
	out = append(out, `,"_token":"`...)
	out = append(out, tok...)
	out = append(out, `"}`...)
	return &engine.Resource{ID: p.ID, RID: p.RID, Body: out, ETag: p.ETag}, nil
}

func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
