package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// Users and permissions are child resources of a database and of a user. A
// user's RID is its database's RID and 4 random bytes; a permission's RID is
// its user's RID and 8 bytes from the sequence number that created it, so a
// permission's RID names its database and user too.

// principalKind says which of the two child resources a function handles.
type principalKind int

const (
	kindUser principalKind = iota
	kindPermission
)

func (k principalKind) name() string {
	if k == kindUser {
		return "user"
	}
	return "permission"
}

// principalParent is where users or permissions live: the key prefix of
// their records, the RID of their parent and their _self prefix.
type principalParent struct {
	kind   principalKind
	prefix []byte
	rid    []byte
	self   string
}

func usersOf(db *Database) principalParent {
	return principalParent{kind: kindUser, prefix: keys.UserPrefix(db.rid), rid: db.rid, self: "dbs/" + db.RID + "/users/"}
}

// permissionsOf returns the parent of a user's permissions; user is the
// user's stored props.
func permissionsOf(db *Database, user map[string]any) principalParent {
	ridStr, _ := user["_rid"].(string)
	rid, _ := rids.Decode(ridStr, 8)
	return principalParent{kind: kindPermission, prefix: keys.PermissionPrefix(rid), rid: rid,
		self: "dbs/" + db.RID + "/users/" + ridStr + "/permissions/"}
}

func (p principalParent) list(ctx context.Context, r storage.Reader) ([]*Resource, []map[string]any, error) {
	it, err := r.NewIterator(ctx, p.prefix, storage.PrefixEnd(p.prefix), false)
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	var out []*Resource
	var props []map[string]any
	for it.Next() {
		raw := append([]byte(nil), it.Value()...)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, err
		}
		out = append(out, scriptResource(m, raw))
		props = append(props, m)
	}
	return out, props, it.Err()
}

// ridLen is the length in bytes of the RIDs of the parent's children.
func (p principalParent) ridLen() int { return len(p.rid) * 2 }

func (p principalParent) key(id string) []byte {
	return append(append([]byte(nil), p.prefix...), id...)
}

// read returns a record's props by id or RID.
func (p principalParent) read(ctx context.Context, r storage.Reader, id string) (map[string]any, []byte, error) {
	raw, err := r.Get(ctx, p.key(id))
	if rid, isRID := rids.Decode(id, p.ridLen()); errors.Is(err, storage.ErrNotFound) && isRID {
		var key []byte
		if key, err = r.Get(ctx, keys.PrincipalRIDKey(rid)); err == nil {
			if !bytes.HasPrefix(key, p.prefix) {
				err = storage.ErrNotFound
			} else {
				raw, err = r.Get(ctx, key)
			}
		}
	}
	return storedProps(raw, err, p.kind.name(), id)
}

// write stores props (system properties added) under the catalog lock. prev
// is the current version on a replace, nil on a create.
func (e *Engine) writePrincipal(ctx context.Context, p principalParent, props, prev map[string]any) (*Resource, error) {
	lsn, err := e.seq.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer e.seq.finish(lsn)
	id := props["id"].(string)
	rid, _ := prev["_rid"].(string)
	if rid == "" {
		if rid, err = e.newPrincipalRID(ctx, p, lsn); err != nil {
			return nil, err
		}
	}
	props["_rid"] = rid
	props["_self"] = p.self + rid + "/"
	props["_etag"] = formatETag(lsn, 0xFFFE)
	props["_ts"] = e.now().Unix()
	if p.kind == kindUser {
		props["_permissions"] = "permissions/"
	}
	body, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	b, err := e.catalogBatch()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := b.Set(p.key(id), body); err != nil {
		return nil, err
	}
	if prevID, _ := prev["id"].(string); prev != nil && prevID != id {
		// A rename: the record moves to its new key, and its RID follows.
		if err := b.Delete(p.key(prevID)); err != nil {
			return nil, err
		}
		ridBytes, _ := rids.Decode(rid, p.ridLen())
		if err := b.Set(keys.PrincipalRIDKey(ridBytes), p.key(id)); err != nil {
			return nil, err
		}
	}
	if prev == nil {
		ridBytes, _ := rids.Decode(rid, p.ridLen())
		if err := b.Set(keys.PrincipalRIDKey(ridBytes), p.key(id)); err != nil {
			return nil, err
		}
	}
	if err := b.Commit(ctx); err != nil {
		return nil, err
	}
	return &Resource{ID: id, RID: rid, Body: body, ETag: props["_etag"].(string)}, nil
}

// newPrincipalRID makes the RID of a new user or permission. The caller
// holds catMu.
func (e *Engine) newPrincipalRID(ctx context.Context, p principalParent, lsn uint64) (string, error) {
	if p.kind == kindPermission {
		return rids.Encode(rids.Child(p.rid, lsn)), nil
	}
	for {
		rid := rids.Random(p.rid, 4)
		_, err := e.store.Get(ctx, keys.PrincipalRIDKey(rid))
		if errors.Is(err, storage.ErrNotFound) {
			return rids.Encode(rid), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// putPrincipal creates (or, when upsert, replaces) a user or permission. The
// caller holds catMu.
func (e *Engine) putPrincipal(ctx context.Context, p principalParent, props map[string]any, upsert bool) (*Resource, bool, error) {
	prev, _, err := p.read(ctx, e.store, props["id"].(string))
	switch {
	case err == nil && !upsert:
		return nil, false, Conflict("A %s with id '%s' already exists. %s", p.kind.name(), props["id"], msgConflict)
	case err == nil:
		res, werr := e.writePrincipal(ctx, p, props, prev)
		return res, false, werr
	case StatusOf(err) != 404:
		return nil, false, err
	}
	res, werr := e.writePrincipal(ctx, p, props, nil)
	return res, true, werr
}

// replacePrincipal replaces the user or permission id with props. The caller
// holds catMu.
func (e *Engine) replacePrincipal(ctx context.Context, p principalParent, id string, props map[string]any, ifMatch string) (*Resource, error) {
	prev, _, err := p.read(ctx, e.store, id)
	if err != nil {
		return nil, err
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return nil, err
	}
	if props["id"] != prev["id"] {
		// The service renames a user or permission replaced with another
		// id (its SDKs' suites rename them so); the RID stays.
		if _, _, err := p.read(ctx, e.store, props["id"].(string)); err == nil {
			return nil, Conflict("A %s with id '%s' already exists. %s", p.kind.name(), props["id"], msgConflict)
		} else if StatusOf(err) != 404 {
			return nil, err
		}
	}
	return e.writePrincipal(ctx, p, props, prev)
}

// lookupUser finds a database and one of its users' props, by names or
// RIDs. The caller holds catMu.
func (e *Engine) lookupUser(ctx context.Context, dbName, user string) (*Database, map[string]any, error) {
	db, err := e.lookupDatabase(dbName)
	if err != nil {
		return nil, nil, err
	}
	props, _, rerr := usersOf(db).read(ctx, e.store, user)
	if rerr != nil {
		return nil, nil, rerr
	}
	return db, props, nil
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

func (e *Engine) putUser(ctx context.Context, dbName string, body []byte, upsert bool) (*Resource, bool, error) {
	props, err := decodeUser(body)
	if err != nil {
		return nil, false, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, false, err
	}
	defer e.catMu.Unlock()
	db, lerr := e.lookupDatabase(dbName)
	if lerr != nil {
		return nil, false, lerr
	}
	return e.putPrincipal(ctx, usersOf(db), props, upsert)
}

// ReadUser returns a user by id or RID.
func (e *Engine) ReadUser(ctx context.Context, db, id string) (*Resource, error) {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	d, err := e.lookupDatabase(db)
	if err != nil {
		return nil, err
	}
	props, raw, rerr := usersOf(d).read(ctx, e.store, id)
	if rerr != nil {
		return nil, rerr
	}
	return scriptResource(props, raw), nil
}

// ListUsers returns a database's users, ordered by id.
func (e *Engine) ListUsers(ctx context.Context, db string) ([]*Resource, error) {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	d, err := e.lookupDatabase(db)
	if err != nil {
		return nil, err
	}
	list, _, lerr := usersOf(d).list(ctx, e.store)
	return list, lerr
}

// ReplaceUser replaces a user's properties (its id cannot change).
func (e *Engine) ReplaceUser(ctx context.Context, db, id string, body []byte, ifMatch string) (*Resource, error) {
	props, err := decodeUser(body)
	if err != nil {
		return nil, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	d, lerr := e.lookupDatabase(db)
	if lerr != nil {
		return nil, lerr
	}
	return e.replacePrincipal(ctx, usersOf(d), id, props, ifMatch)
}

// DeleteUser deletes a user and its permissions, which revokes every
// resource token they issued.
func (e *Engine) DeleteUser(ctx context.Context, db, id, ifMatch string) error {
	if err := e.catMu.Lock(ctx); err != nil {
		return err
	}
	defer e.catMu.Unlock()
	d, user, err := e.lookupUser(ctx, db, id)
	if err != nil {
		return err
	}
	if err := matchCatalogETag(ifMatch, user["_etag"]); err != nil {
		return err
	}
	b, err := e.catalogBatch()
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Delete(keys.UserKey(d.rid, user["id"].(string))); err != nil {
		return err
	}
	perms := permissionsOf(d, user)
	if err := deleteRange(ctx, e.store, b, perms.prefix, nil); err != nil {
		return err
	}
	if err := deleteRange(ctx, e.store, b, []byte{keys.PrincipalRID}, perms.rid); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// deleteDatabasePrincipals records the deletion of a database's users and
// permissions into b.
func (e *Engine) deleteDatabasePrincipals(ctx context.Context, b storage.Batch, db *Database) error {
	for _, prefix := range []byte{keys.User, keys.Permission, keys.PrincipalRID} {
		if err := deleteRange(ctx, e.store, b, []byte{prefix}, db.rid); err != nil {
			return err
		}
	}
	return nil
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
	p := &Permission{Resource: *scriptResource(props, raw)}
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

func (e *Engine) putPermission(ctx context.Context, db, user string, body []byte, upsert bool) (*Permission, bool, error) {
	props, err := decodePermission(body)
	if err != nil {
		return nil, false, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, false, err
	}
	defer e.catMu.Unlock()
	d, u, lerr := e.lookupUser(ctx, db, user)
	if lerr != nil {
		return nil, false, lerr
	}
	if err := e.checkOnePermissionPerResource(ctx, permissionsOf(d, u), props); err != nil {
		return nil, false, err
	}
	res, created, perr := e.putPrincipal(ctx, permissionsOf(d, u), props, upsert)
	if perr != nil {
		return nil, false, perr
	}
	p, err := permissionOf(props, res.Body)
	return p, created, err
}

// checkOnePermissionPerResource refuses a second permission of a user on
// the same resource: a user holds at most one per resource. The caller
// holds catMu.
func (e *Engine) checkOnePermissionPerResource(ctx context.Context, perms principalParent, props map[string]any) error {
	_, list, err := perms.list(ctx, e.store)
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
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	d, u, err := e.lookupUser(ctx, db, user)
	if err != nil {
		return nil, err
	}
	props, raw, rerr := permissionsOf(d, u).read(ctx, e.store, id)
	if rerr != nil {
		return nil, rerr
	}
	return permissionOf(props, raw)
}

// ListPermissions returns a user's permissions, ordered by id.
func (e *Engine) ListPermissions(ctx context.Context, db, user string) ([]*Permission, error) {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	d, u, err := e.lookupUser(ctx, db, user)
	if err != nil {
		return nil, err
	}
	list, props, lerr := permissionsOf(d, u).list(ctx, e.store)
	if lerr != nil {
		return nil, lerr
	}
	out := make([]*Permission, len(list))
	for i := range list {
		if out[i], err = permissionOf(props[i], list[i].Body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReplacePermission replaces a permission's mode, resource and partition key.
func (e *Engine) ReplacePermission(ctx context.Context, db, user, id string, body []byte, ifMatch string) (*Permission, error) {
	props, err := decodePermission(body)
	if err != nil {
		return nil, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	d, u, lerr := e.lookupUser(ctx, db, user)
	if lerr != nil {
		return nil, lerr
	}
	res, rerr := e.replacePrincipal(ctx, permissionsOf(d, u), id, props, ifMatch)
	if rerr != nil {
		return nil, rerr
	}
	return permissionOf(props, res.Body)
}

// DeletePermission deletes a permission, which revokes its resource tokens.
func (e *Engine) DeletePermission(ctx context.Context, db, user, id, ifMatch string) error {
	if err := e.catMu.Lock(ctx); err != nil {
		return err
	}
	defer e.catMu.Unlock()
	d, u, err := e.lookupUser(ctx, db, user)
	if err != nil {
		return err
	}
	perms := permissionsOf(d, u)
	prev, _, rerr := perms.read(ctx, e.store, id)
	if rerr != nil {
		return rerr
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return err
	}
	b, err := e.catalogBatch()
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Delete(perms.key(prev["id"].(string))); err != nil {
		return err
	}
	rid, _ := rids.Decode(prev["_rid"].(string), perms.ridLen())
	if err := b.Delete(keys.PrincipalRIDKey(rid)); err != nil {
		return err
	}
	return b.Commit(ctx)
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
	props, raw, rerr := e.lookupUserPermission(ctx, d, rids.Encode(b[:8]), rid)
	if rerr != nil {
		return nil, rerr
	}
	return permissionOf(props, raw)
}

func (e *Engine) lookupUserPermission(ctx context.Context, d *Database, userRID, rid string) (map[string]any, []byte, error) {
	u, _, err := usersOf(d).read(ctx, e.store, userRID)
	if err != nil {
		return nil, nil, err
	}
	return permissionsOf(d, u).read(ctx, e.store, rid)
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
