package server

import (
	"net/http"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// listUsers answers GET /dbs/{db}/users.
func (s *Server) listUsers(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListUsers(ctx, r.t.db)
	if err != nil {
		return err
	}
	return s.readResourceFeed(r, "Users", list)
}

// queryUsers answers a query POSTed to /dbs/{db}/users.
func (s *Server) queryUsers(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListUsers(ctx, r.t.db)
	if err != nil {
		return err
	}
	return s.queryResources(r, "", "Users", list)
}

// createUser serves POST /dbs/{db}/users: create, or upsert.
func (s *Server) createUser(r *request) error {
	ctx := r.Context()
	if r.op.verb == "upsert" {
		res, created, err := s.eng.UpsertUser(ctx, r.t.db, r.body)
		if err != nil {
			return err
		}
		r.writeJSON(createdOrOK(created), res.Body, res.ETag, 1)
		return nil
	}
	res, err := s.eng.CreateUser(ctx, r.t.db, r.body)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
	return nil
}

// readUser serves GET /dbs/{db}/users/{id}.
func (s *Server) readUser(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReadUser(ctx, r.t.db, r.t.id)
	if err != nil {
		return err
	}
	return r.writeResource(res)
}

// replaceUser serves PUT /dbs/{db}/users/{id}.
func (s *Server) replaceUser(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReplaceUser(ctx, r.t.db, r.t.id, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}

// deleteUser serves DELETE /dbs/{db}/users/{id}.
func (s *Server) deleteUser(r *request) error {
	ctx := r.Context()
	if err := s.eng.DeleteUser(ctx, r.t.db, r.t.id, r.ifMatch()); err != nil {
		return err
	}
	r.writeJSON(http.StatusNoContent, nil, "", 1)
	return nil
}

// tokenExpiry returns when the resource tokens a permission request
// returns expire. Only the master key gets here (the operations table).
func (s *Server) tokenExpiry(r *request) (time.Time, error) {
	lifetime, err := tokenLifetime(r.Header)
	if err != nil {
		return time.Time{}, err
	}
	return s.now().Add(lifetime), nil
}

// listPermissions answers GET, or a query POSTed to,
// /dbs/{db}/users/{user}/permissions. Every permission returned carries a
// fresh _token.
func (s *Server) listPermissions(r *request) error {
	ctx := r.Context()
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	list, err := s.eng.ListPermissions(ctx, r.t.db, r.t.user)
	if err != nil {
		return err
	}
	withTokens := make([]*engine.Resource, len(list))
	for i, p := range list {
		if withTokens[i], err = s.tokenized(p, expiry); err != nil {
			return err
		}
	}
	if r.op.verb == "list" {
		return s.readResourceFeed(r, "Permissions", withTokens)
	}
	return s.queryResources(r, "", "Permissions", withTokens)
}

// createPermission serves POST /dbs/{db}/users/{user}/permissions: create,
// or upsert.
func (s *Server) createPermission(r *request) error {
	ctx := r.Context()
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	var p *engine.Permission
	created := true
	if r.op.verb == "upsert" {
		p, created, err = s.eng.UpsertPermission(ctx, r.t.db, r.t.user, r.body)
	} else {
		p, err = s.eng.CreatePermission(ctx, r.t.db, r.t.user, r.body)
	}
	if err != nil {
		return err
	}
	return s.writePermission(r, createdOrOK(created), p, expiry)
}

// readPermission serves GET /dbs/{db}/users/{user}/permissions/{id}.
func (s *Server) readPermission(r *request) error {
	ctx := r.Context()
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	p, err := s.eng.ReadPermission(ctx, r.t.db, r.t.user, r.t.id)
	if err != nil {
		return err
	}
	if inm := r.ifNoneMatch(); inm != "" && (inm == "*" || inm == p.ETag) {
		r.writeJSON(http.StatusNotModified, nil, p.ETag, 1)
		return nil
	}
	return s.writePermission(r, http.StatusOK, p, expiry)
}

// replacePermission serves PUT /dbs/{db}/users/{user}/permissions/{id}.
func (s *Server) replacePermission(r *request) error {
	ctx := r.Context()
	expiry, err := s.tokenExpiry(r)
	if err != nil {
		return err
	}
	p, err := s.eng.ReplacePermission(ctx, r.t.db, r.t.user, r.t.id, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	return s.writePermission(r, http.StatusOK, p, expiry)
}

// deletePermission serves DELETE /dbs/{db}/users/{user}/permissions/{id}.
func (s *Server) deletePermission(r *request) error {
	ctx := r.Context()
	if _, err := s.tokenExpiry(r); err != nil {
		return err
	}
	if err := s.eng.DeletePermission(ctx, r.t.db, r.t.user, r.t.id, r.ifMatch()); err != nil {
		return err
	}
	r.writeJSON(http.StatusNoContent, nil, "", 1)
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
