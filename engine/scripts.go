package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/storage"
)

// ScriptKind is the kind of a container's server-side script, named as in
// its resource path.
type ScriptKind string

// The script kinds.
const (
	StoredProcedures ScriptKind = "sprocs"
	Triggers         ScriptKind = "triggers"
	UserFunctions    ScriptKind = "udfs"
)

// FeedKey is the name of the array a feed of this kind is returned in.
func (k ScriptKind) FeedKey() string {
	switch k {
	case StoredProcedures:
		return "StoredProcedures"
	case Triggers:
		return "Triggers"
	}
	return "UserDefinedFunctions"
}

// ParseScriptKind maps a path segment to a script kind.
func ParseScriptKind(seg string) (ScriptKind, bool) {
	switch k := ScriptKind(seg); k {
	case StoredProcedures, Triggers, UserFunctions:
		return k, true
	}
	return "", false
}

// validateScript checks a script body and, for triggers, its type and operation.
func validateScript(kind ScriptKind, props map[string]any) *Error {
	body, ok := props["body"].(string)
	if !ok {
		return BadRequest("The script must have a body: a string holding a JavaScript function.")
	}
	// Procedures and functions are compiled at create and replace, as the
	// service does, so that a syntax error is answered here (400, with its
	// line) and not at the first run. A trigger's body is kept as sent and
	// compiled when a write names it: the service accepts any text for it.
	id, _ := props["id"].(string)
	if kind != Triggers {
		if err := script.Validate(id, body); err != nil {
			e, _ := AsError(scriptError(err))
			if e == nil {
				e = BadRequest("%v", err)
			}
			return e
		}
		return nil
	}
	tt, _ := props["triggerType"].(string)
	switch strings.ToLower(tt) {
	case "pre":
		props["triggerType"] = "Pre"
	case "post":
		props["triggerType"] = "Post"
	default:
		return BadRequest("The trigger type %q is invalid: it must be Pre or Post.", tt)
	}
	op, _ := props["triggerOperation"].(string)
	for _, known := range []string{"All", "Create", "Replace", "Delete", "Update", "Upsert"} {
		if strings.EqualFold(op, known) {
			props["triggerOperation"] = known
			return nil
		}
	}
	return BadRequest("The trigger operation %q is invalid: it must be All, Create, Replace, Delete or Upsert.", op)
}

// writeScript stores a script's props (system properties added) under the
// catalog lock. prev is the current version on a replace.
func (e *Engine) writeScript(ctx context.Context, c *Container, kind ScriptKind, props map[string]any, prev map[string]any) (*Resource, error) {
	lsn, err := e.seq.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer e.seq.finish(lsn)
	id := props["id"].(string)
	rid, _ := prev["_rid"].(string)
	if rid == "" {
		rid = rids.Encode(rids.Child(c.rid, lsn<<16|0xFFFF))
	}
	props["_rid"] = rid
	props["_self"] = c.Self() + string(kind) + "/" + rid + "/"
	props["_etag"] = formatETag(lsn, 0xFFFF)
	props["_ts"] = e.now().Unix()
	body, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	b, err := e.catalogBatch()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := b.Set(keys.ChildKey(c.rid, string(kind), id), body); err != nil {
		return nil, err
	}
	if err := b.Commit(ctx); err != nil {
		return nil, err
	}
	return &Resource{ID: id, RID: rid, Body: body, ETag: props["_etag"].(string)}, nil
}

// CreateScript creates a stored procedure, trigger or user-defined function.
func (e *Engine) CreateScript(ctx context.Context, db, coll string, kind ScriptKind, body []byte) (*Resource, error) {
	props, _, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	if err := validateScript(kind, props); err != nil {
		return nil, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	c, lerr := e.lookupContainer(db, coll)
	if lerr != nil {
		return nil, lerr
	}
	if _, err := e.store.Get(ctx, keys.ChildKey(c.rid, string(kind), props["id"].(string))); err == nil {
		return nil, Conflict("A %s with id '%s' already exists. %s", kind.singular(), props["id"], msgConflict)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	return e.writeScript(ctx, c, kind, props, nil)
}

func (k ScriptKind) singular() string {
	switch k {
	case StoredProcedures:
		return "stored procedure"
	case Triggers:
		return "trigger"
	}
	return "user-defined function"
}

// readScript returns a script's stored props, by id or RID.
func (e *Engine) readScript(ctx context.Context, c *Container, kind ScriptKind, id string) (map[string]any, []byte, error) {
	raw, err := e.store.Get(ctx, keys.ChildKey(c.rid, string(kind), id))
	if errors.Is(err, storage.ErrNotFound) {
		if _, isRID := rids.Decode(id, 16); isRID {
			list, lerr := e.listScripts(ctx, c, kind)
			if lerr != nil {
				return nil, nil, lerr
			}
			for _, r := range list {
				if r.RID == id {
					raw, err = r.Body, nil
				}
			}
		}
	}
	return storedProps(raw, err, kind.singular(), id)
}

// storedProps decodes a child resource's stored record, the outcome of
// reading it (raw, err): storage.ErrNotFound becomes the 404 of a kind
// (stored procedure, user...) named id.
func storedProps(raw []byte, err error, kind, id string) (map[string]any, []byte, error) {
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil, NotFound("The %s '%s' does not exist. %s", kind, id, msgNotFound)
	}
	if err != nil {
		return nil, nil, err
	}
	var props map[string]any
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, nil, err
	}
	return props, raw, nil
}

// ReadScript returns a script by id or RID.
func (e *Engine) ReadScript(ctx context.Context, db, coll string, kind ScriptKind, id string) (*Resource, error) {
	c, err := e.Container(ctx, db, coll)
	if err != nil {
		return nil, err
	}
	props, raw, err := e.readScript(ctx, c, kind, id)
	if err != nil {
		return nil, err
	}
	return scriptResource(props, raw), nil
}

func scriptResource(props map[string]any, raw []byte) *Resource {
	id, _ := props["id"].(string)
	rid, _ := props["_rid"].(string)
	etag, _ := props["_etag"].(string)
	return &Resource{ID: id, RID: rid, Body: raw, ETag: etag}
}

func (e *Engine) listScripts(ctx context.Context, c *Container, kind ScriptKind) ([]*Resource, error) {
	p := keys.ChildPrefix(c.rid, string(kind))
	it, err := e.store.NewIterator(ctx, p, storage.PrefixEnd(p), false)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*Resource
	for it.Next() {
		raw := append([]byte(nil), it.Value()...)
		var props map[string]any
		if err := json.Unmarshal(raw, &props); err != nil {
			return nil, err
		}
		out = append(out, scriptResource(props, raw))
	}
	return out, it.Err()
}

// ListScripts returns a container's scripts of one kind, ordered by id.
func (e *Engine) ListScripts(ctx context.Context, db, coll string, kind ScriptKind) ([]*Resource, error) {
	c, err := e.Container(ctx, db, coll)
	if err != nil {
		return nil, err
	}
	return e.listScripts(ctx, c, kind)
}

// ReplaceScript replaces a script's body (and a trigger's type and operation).
func (e *Engine) ReplaceScript(ctx context.Context, db, coll string, kind ScriptKind, id string, body []byte, ifMatch string) (*Resource, error) {
	props, newID, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	if err := validateScript(kind, props); err != nil {
		return nil, err
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	c, lerr := e.lookupContainer(db, coll)
	if lerr != nil {
		return nil, lerr
	}
	prev, _, err := e.readScript(ctx, c, kind, id)
	if err != nil {
		return nil, err
	}
	if newID != prev["id"] {
		return nil, BadRequest("The id in the body (%q) must match the %s's id (%q).", newID, kind.singular(), prev["id"])
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return nil, err
	}
	return e.writeScript(ctx, c, kind, props, prev)
}

// DeleteScript deletes a script.
func (e *Engine) DeleteScript(ctx context.Context, db, coll string, kind ScriptKind, id string, ifMatch string) error {
	if err := e.catMu.Lock(ctx); err != nil {
		return err
	}
	defer e.catMu.Unlock()
	c, lerr := e.lookupContainer(db, coll)
	if lerr != nil {
		return lerr
	}
	prev, _, err := e.readScript(ctx, c, kind, id)
	if err != nil {
		return err
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return err
	}
	b, err := e.catalogBatch()
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Delete(keys.ChildKey(c.rid, string(kind), prev["id"].(string))); err != nil {
		return err
	}
	return b.Commit(ctx)
}
