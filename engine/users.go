package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// Users and permissions are child resources of a database and of a user. A
// user's RID is its database's RID and 4 random bytes; a permission's RID is
// its user's RID and 8 bytes from the sequence number that created it, so a
// permission's RID names its database and user too.

func (cat *catalog) usersOf(db *Database) childSet {
	return childSet{kind: "user", prefix: keys.UserPrefix(db.rid), self: "dbs/" + db.RID + "/users/",
		ridLen: 8, salt: 0xFFFE, links: map[string]string{"_permissions": "permissions/"}, ridIndex: true, renames: true,
		newRID: func(ctx context.Context, _ uint64) ([]byte, error) {
			for {
				rid := rids.Random(db.rid, 4)
				_, err := cat.store.Get(ctx, keys.PrincipalRIDKey(rid))
				if errors.Is(err, storage.ErrNotFound) {
					return rid, nil
				}
				if err != nil {
					return nil, err
				}
			}
		}}
}

// permissionsOf returns the permissions of a user; user is the user's
// stored props.
func permissionsOf(db *Database, user map[string]any) childSet {
	ridStr, _ := user["_rid"].(string)
	rid, _ := rids.Decode(ridStr, 8)
	return childSet{kind: "permission", prefix: keys.PermissionPrefix(rid),
		self:   "dbs/" + db.RID + "/users/" + ridStr + "/permissions/",
		ridLen: 16, salt: 0xFFFE, ridIndex: true, renames: true,
		newRID: func(_ context.Context, lsn uint64) ([]byte, error) { return rids.Child(rid, lsn), nil }}
}

// decodeUser parses the body of a user create or replace.
func decodeUser(body []byte) (map[string]any, error) {
	props, _, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	delete(props, "_permissions")
	return props, nil
}

// CreateUser creates a user in a database.
func (e *Engine) CreateUser(ctx context.Context, db string, body []byte) (*Resource, error) {
	res, _, err := e.putUser(ctx, db, body, false)
	return res, err
}

// UpsertUser creates a user or replaces the one with the same id; created
// tells which.
func (e *Engine) UpsertUser(ctx context.Context, db string, body []byte) (res *Resource, created bool, err error) {
	return e.putUser(ctx, db, body, true)
}

// putUser creates a user in database db, or with upsert replaces the one
// with the same id; created tells which.
func (cat *catalog) putUser(ctx context.Context, db string, body []byte, upsert bool) (*Resource, bool, error) {
	props, err := decodeUser(body)
	if err != nil {
		return nil, false, err
	}
	created := false
	res, err := inDatabase(ctx, cat, db, true, func(d *Database) (res *Resource, err error) {
		res, created, err = cat.createChild(ctx, cat.usersOf(d), props, upsert)
		return res, err
	})
	return res, created, err
}

// ReadUser returns a user by id or RID.
func (e *Engine) ReadUser(ctx context.Context, db, id string) (*Resource, error) {
	return inDatabase(ctx, &e.catalog, db, false, func(d *Database) (*Resource, error) {
		props, raw, err := e.usersOf(d).read(ctx, e.store, id)
		if err != nil {
			return nil, err
		}
		return childResource(props, raw), nil
	})
}

// ListUsers returns a database's users, ordered by id.
func (e *Engine) ListUsers(ctx context.Context, db string) ([]*Resource, error) {
	return inDatabase(ctx, &e.catalog, db, false, func(d *Database) ([]*Resource, error) {
		list, _, err := e.usersOf(d).list(ctx, e.store)
		return list, err
	})
}

// ReplaceUser replaces a user's properties; a body with another id renames
// the user, as the service does (its RID stays).
func (e *Engine) ReplaceUser(ctx context.Context, db, id string, body []byte, ifMatch string) (*Resource, error) {
	props, err := decodeUser(body)
	if err != nil {
		return nil, err
	}
	return inDatabase(ctx, &e.catalog, db, true, func(d *Database) (*Resource, error) {
		return e.replaceChild(ctx, e.usersOf(d), id, props, ifMatch)
	})
}

// DeleteUser deletes a user and its permissions, which revokes every
// resource token they issued.
func (e *Engine) DeleteUser(ctx context.Context, db, id, ifMatch string) error {
	_, err := inDatabase(ctx, &e.catalog, db, true, func(d *Database) (struct{}, error) {
		return struct{}{}, e.deleteChild(ctx, e.usersOf(d), id, ifMatch, func(b storage.Batch, user map[string]any) error {
			perms := permissionsOf(d, user)
			if err := deleteRange(ctx, e.store, b, perms.prefix, nil); err != nil {
				return err
			}
			// The user's RID starts its permissions' RIDs.
			userRID, _ := rids.Decode(user["_rid"].(string), 8)
			return deleteRange(ctx, e.store, b, []byte{keys.PrincipalRID}, userRID)
		})
	})
	return err
}

// Permission modes.
const (
	PermissionAll  = "All"
	PermissionRead = "Read"
)

// Permission is a user's grant on a resource, as stored (without a token).
type Permission struct {
	Resource
	// Mode is PermissionAll or PermissionRead.
	Mode string
	// Link is the granted resource's link as given, without outer slashes:
	// name based (dbs/db/colls/c) or RID based.
	Link string
	// PartitionKey restricts the grant to one logical partition when
	// HasPartitionKey is set.
	PartitionKey    PartitionKey
	HasPartitionKey bool
}

// grantableKinds are the resource types a permission's link may end in
// below a container.
var grantableKinds = map[string]bool{"docs": true, "sprocs": true, "triggers": true, "udfs": true, "attachments": true}

// ParseResourceLink splits a permission's resource link into its segments
// and checks its shape: dbs/{db}[/colls/{coll}[/{docs|sprocs|triggers|udfs}/{id}]].
func ParseResourceLink(link string) ([]string, *Error) {
	segs := strings.Split(strings.Trim(link, "/"), "/")
	ok := len(segs)%2 == 0 && len(segs) <= 6 && segs[0] == "dbs" &&
		(len(segs) < 4 || segs[2] == "colls") && (len(segs) < 6 || grantableKinds[segs[4]])
	for _, s := range segs {
		ok = ok && s != ""
	}
	if !ok {
		return nil, BadRequest("The permission's resource %q is not a valid resource link: it must be dbs/{db}[/colls/{container}[/docs/{id}]].", link)
	}
	return segs, nil
}

// decodePermission parses and validates the body of a permission create or
// replace, normalizing its mode.
func decodePermission(body []byte) (map[string]any, error) {
	props, _, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	delete(props, "_token")
	// The mode is kept as the client spelled it ("all", "All"), as the
	// service keeps it; permissionOf reads it case-insensitively.
	mode, _ := props["permissionMode"].(string)
	switch {
	case strings.EqualFold(mode, PermissionAll), strings.EqualFold(mode, PermissionRead):
	default:
		return nil, BadRequest("The permission mode %q is invalid: permissionMode must be All or Read.", mode)
	}
	link, ok := props["resource"].(string)
	if !ok {
		return nil, BadRequest("The input content is invalid because the required property, resource, is missing.")
	}
	if _, err := ParseResourceLink(link); err != nil {
		return nil, err
	}
	if pk, ok := props["resourcePartitionKey"]; ok && pk != nil {
		raw, _ := json.Marshal(pk)
		if _, isArray := pk.([]any); !isArray {
			return nil, BadRequest("The resourcePartitionKey %s is invalid: it must be a JSON array of the partition key's values.", raw)
		}
		if _, err := ParsePartitionKeyHeader(string(raw)); err != nil {
			return nil, BadRequest("The resourcePartitionKey %s is invalid: %v", raw, err)
		}
	}
	return props, nil
}

// permissionOf returns a stored permission's typed view.
func permissionOf(props map[string]any, raw []byte) (*Permission, error) {
	p := &Permission{Resource: *childResource(props, raw)}
	p.Mode, _ = props["permissionMode"].(string)
	if strings.EqualFold(p.Mode, PermissionAll) {
		p.Mode = PermissionAll
	} else {
		p.Mode = PermissionRead
	}
	link, _ := props["resource"].(string)
	p.Link = strings.Trim(link, "/")
	if pk, ok := props["resourcePartitionKey"]; ok && pk != nil {
		enc, _ := json.Marshal(pk)
		key, err := ParsePartitionKeyHeader(string(enc))
		if err != nil {
			return nil, err
		}
		p.PartitionKey, p.HasPartitionKey = key, true
	}
	return p, nil
}

// storedPermission is permissionOf of a stored permission record raw
// decoded into a map (storedProps), without the map: a resource token's
// request reads one permission, and decoding its record into a
// map[string]any took most of that request's allocations. The record is
// checked as json.Unmarshal checks it, then its top-level object is
// scanned for the six properties a Permission is made of, matched by
// their exact names as a map's keys are (the last of a repeated name
// wins, as in the map). What the scan does not take on (a name written
// with escapes, a record that is not an object) goes the map's way.
// TestAStoredPermissionReadsAsItsMapDecodeDoes holds the two equal.
func storedPermission(raw []byte) (*Permission, error) {
	if p, ok, err := scanPermission(raw); ok {
		return p, err
	}
	var props map[string]any
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, err
	}
	return permissionOf(props, raw)
}

// scanPermission reads a permission from its record; ok is false when
// the record is left to the map decode.
func scanPermission(raw []byte) (p *Permission, ok bool, err error) {
	if !json.Valid(raw) {
		return nil, false, nil
	}
	i := jsondoc.SkipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, false, nil
	}
	var id, rid, etag, mode, link, pk []byte
	i = jsondoc.SkipSpace(raw, i+1)
	for raw[i] != '}' {
		// A name (valid JSON: a string), then ':' and a value.
		start := i + 1
		end := start
		for raw[end] != '"' {
			if raw[end] == '\\' {
				return nil, false, nil
			}
			end++
		}
		name := raw[start:end]
		i = jsondoc.SkipSpace(raw, end+1) // at ':'
		i = jsondoc.SkipSpace(raw, i+1)
		v := raw[i:jsondoc.SkipValue(raw, i)]
		switch string(name) {
		case "id":
			id = v
		case "_rid":
			rid = v
		case "_etag":
			etag = v
		case "permissionMode":
			mode = v
		case "resource":
			link = v
		case "resourcePartitionKey":
			pk = v
		}
		i = jsondoc.SkipSpace(raw, i+len(v))
		if raw[i] == ',' {
			i = jsondoc.SkipSpace(raw, i+1)
		}
	}
	p = &Permission{Resource: Resource{ID: jsonString(id), RID: jsonString(rid), Body: raw, ETag: jsonString(etag)}}
	p.Mode = PermissionRead
	if m, plain := plainString(mode); plain {
		if bytes.EqualFold(m, []byte(PermissionAll)) {
			p.Mode = PermissionAll
		}
	} else if strings.EqualFold(jsonString(mode), PermissionAll) {
		p.Mode = PermissionAll
	}
	if l, plain := plainString(link); plain {
		p.Link = string(bytes.Trim(l, "/"))
	} else {
		p.Link = strings.Trim(jsonString(link), "/")
	}
	if pk != nil && string(pk) != "null" {
		var v any
		if err := json.Unmarshal(pk, &v); err != nil {
			return nil, true, err
		}
		enc, _ := json.Marshal(v)
		key, err := ParsePartitionKeyHeader(string(enc))
		if err != nil {
			return nil, true, err
		}
		p.PartitionKey, p.HasPartitionKey = key, true
	}
	return p, true, nil
}

// plainString returns the inside of a JSON string value v that reads as
// it is written (no escape, valid UTF-8); plain is false for anything
// else, a string or not.
func plainString(v []byte) (s []byte, plain bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return nil, false
	}
	return in, true
}

// jsonString is the string a map decode gives for the value v, as
// permissionOf reads it: "" when v is absent or not a string.
func jsonString(v []byte) string {
	if s, plain := plainString(v); plain {
		return string(s)
	}
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	var s string
	json.Unmarshal(v, &s)
	return s
}

// CreatePermission creates a permission of a user.
func (e *Engine) CreatePermission(ctx context.Context, db, user string, body []byte) (*Permission, error) {
	p, _, err := e.putPermission(ctx, db, user, body, false)
	return p, err
}

// UpsertPermission creates a permission or replaces the one with the same
// id; created tells which.
func (e *Engine) UpsertPermission(ctx context.Context, db, user string, body []byte) (p *Permission, created bool, err error) {
	return e.putPermission(ctx, db, user, body, true)
}

// putPermission creates a permission of user, or with upsert replaces the
// one with the same id; created tells which. A user holds one permission
// per resource.
func (cat *catalog) putPermission(ctx context.Context, db, user string, body []byte, upsert bool) (*Permission, bool, error) {
	props, err := decodePermission(body)
	if err != nil {
		return nil, false, err
	}
	created := false
	p, err := inUser(ctx, cat, db, user, true, func(perms childSet) (*Permission, error) {
		if err := cat.checkOnePermissionPerResource(ctx, perms, props); err != nil {
			return nil, err
		}
		res, c, err := cat.createChild(ctx, perms, props, upsert)
		if err != nil {
			return nil, err
		}
		created = c
		return permissionOf(props, res.Body)
	})
	return p, created, err
}

// inUser runs fn on the permissions of user (by id or RID) of database db,
// holding the catalog as inDatabase does.
func inUser[T any](ctx context.Context, cat *catalog, db, user string, write bool, fn func(perms childSet) (T, error)) (T, error) {
	return inDatabase(ctx, cat, db, write, func(d *Database) (T, error) {
		u, _, err := cat.usersOf(d).read(ctx, cat.store, user)
		if err != nil {
			var zero T
			return zero, err
		}
		return fn(permissionsOf(d, u))
	})
}

// checkOnePermissionPerResource refuses a second permission of a user on
// the same resource: a user holds at most one per resource. The caller
// holds catMu.
func (cat *catalog) checkOnePermissionPerResource(ctx context.Context, perms childSet, props map[string]any) error {
	_, list, err := perms.list(ctx, cat.store)
	if err != nil {
		return err
	}
	link := strings.Trim(props["resource"].(string), "/")
	for _, other := range list {
		otherLink, _ := other["resource"].(string)
		if other["id"] != props["id"] && strings.Trim(otherLink, "/") == link {
			return Conflict("The user already has the permission '%s' on the resource '%s': a user holds one permission per resource.", other["id"], link)
		}
	}
	return nil
}

// ReadPermission returns a user's permission by id or RID.
func (e *Engine) ReadPermission(ctx context.Context, db, user, id string) (*Permission, error) {
	return inUser(ctx, &e.catalog, db, user, false, func(perms childSet) (*Permission, error) {
		props, raw, err := perms.read(ctx, e.store, id)
		if err != nil {
			return nil, err
		}
		return permissionOf(props, raw)
	})
}

// ListPermissions returns a user's permissions, ordered by id.
func (e *Engine) ListPermissions(ctx context.Context, db, user string) ([]*Permission, error) {
	return inUser(ctx, &e.catalog, db, user, false, func(perms childSet) ([]*Permission, error) {
		list, props, err := perms.list(ctx, e.store)
		if err != nil {
			return nil, err
		}
		out := make([]*Permission, len(list))
		for i := range list {
			if out[i], err = permissionOf(props[i], list[i].Body); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// ReplacePermission replaces a permission's mode, resource and partition
// key; a body with another id renames it, as the service does.
func (e *Engine) ReplacePermission(ctx context.Context, db, user, id string, body []byte, ifMatch string) (*Permission, error) {
	props, err := decodePermission(body)
	if err != nil {
		return nil, err
	}
	return inUser(ctx, &e.catalog, db, user, true, func(perms childSet) (*Permission, error) {
		res, err := e.replaceChild(ctx, perms, id, props, ifMatch)
		if err != nil {
			return nil, err
		}
		return permissionOf(props, res.Body)
	})
}

// DeletePermission deletes a permission, which revokes its resource tokens.
func (e *Engine) DeletePermission(ctx context.Context, db, user, id, ifMatch string) error {
	_, err := inUser(ctx, &e.catalog, db, user, true, func(perms childSet) (struct{}, error) {
		return struct{}{}, e.deleteChild(ctx, perms, id, ifMatch, nil)
	})
	return err
}

// PermissionByRID finds a permission by its RID, which names its database
// and user; NotFound when any of them is gone.
func (e *Engine) PermissionByRID(ctx context.Context, rid string) (*Permission, error) {
	b, ok := rids.Decode(rid, 16)
	if !ok {
		return nil, NotFound("'%s' is not the RID of a permission.", rid)
	}
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	d, err := e.lookupDatabase(rids.Encode(b[:4]))
	if err != nil {
		return nil, err
	}
	raw, rerr := e.lookupUserPermission(ctx, d, b[:8], b, rid)
	if rerr != nil {
		return nil, rerr
	}
	return storedPermission(raw)
}

// lookupUserPermission reads the permission of RID permRID (rid, encoded)
// of the user of RID userRID, each by its RID: the user's record is read to
// know it exists (deleting a user deletes its permissions in the same
// batch), not decoded; its permissions are under its RID. The record is
// returned as stored, for storedPermission.
func (cat *catalog) lookupUserPermission(ctx context.Context, d *Database, userRID, permRID []byte, rid string) ([]byte, error) {
	users := childSet{kind: "user", prefix: keys.UserPrefix(d.rid), ridIndex: true}
	if _, err := users.readByRID(ctx, cat.store, userRID); err != nil {
		_, _, err = storedProps(nil, err, users.kind, rids.Encode(userRID))
		return nil, err
	}
	perms := childSet{kind: "permission", prefix: keys.PermissionPrefix(userRID), ridIndex: true}
	raw, err := perms.readByRID(ctx, cat.store, permRID)
	if err != nil {
		_, _, err = storedProps(nil, err, perms.kind, rid)
		return nil, err
	}
	return raw, nil
}

// ResolveLink maps the database and container names of a resource path
// (segments as in dbs/{db}/colls/{coll}/…) to their RIDs where they exist,
// so that name-based and RID-based links of one resource compare equal.
// Other segments are returned as they are.
func (e *Engine) ResolveLink(ctx context.Context, segs []string) []string {
	out := append([]string(nil), segs...)
	if len(out) < 2 || out[0] != "dbs" {
		return out
	}
	e.catMu.RLock(ctx)
	defer e.catMu.RUnlock()
	db, err := e.lookupDatabase(out[1])
	if err != nil {
		return out
	}
	out[1] = db.RID
	if len(out) < 4 || out[2] != "colls" {
		return out
	}
	if c, cerr := e.lookupContainer(db.RID, out[3]); cerr == nil {
		out[3] = c.RID
	}
	return out
}
