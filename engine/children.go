package engine

import (
	"context"
	"encoding/json"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// A catalog child is a resource stored as one JSON record under its
// parent: the users of a database, the permissions of a user, the scripts
// of a container, the client encryption keys of a database. Their create,
// read, replace, delete and feed are written once, here and in
// childset.go (the reads); childSet holds what differs between them, and
// each kind's file keeps only its validation and its side effects.

// createChild creates a child from props (validated, system properties
// stripped), or, when upsert, replaces the one with its id; created tells
// which. The caller holds catMu.
func (cat *catalog) createChild(ctx context.Context, s childSet, props map[string]any, upsert bool) (res *Resource, created bool, err error) {
	id := props["id"].(string)
	if !upsert {
		taken, err := s.exists(ctx, cat.store, id)
		if err != nil {
			return nil, false, err
		}
		if taken {
			return nil, false, Conflict("A %s with id '%s' already exists. %s", s.kind, id, msgConflict)
		}
		res, err := cat.writeChild(ctx, s, props, nil)
		return res, true, err
	}
	// By id only: an id that is another child's RID names no child here.
	raw, err := cat.store.Get(ctx, s.key(id))
	prev, _, err := storedProps(raw, err, s.kind, id)
	if StatusOf(err) == 404 {
		res, err := cat.writeChild(ctx, s, props, nil)
		return res, true, err
	}
	if err != nil {
		return nil, false, err
	}
	res, err = cat.writeChild(ctx, s, props, prev)
	return res, false, err
}

// replaceChild replaces child id with props under the If-Match rule; a
// replace with another id renames it when the kind allows that. The caller
// holds catMu.
func (cat *catalog) replaceChild(ctx context.Context, s childSet, id string, props map[string]any, ifMatch string) (*Resource, error) {
	prev, _, err := s.read(ctx, cat.store, id)
	if err != nil {
		return nil, err
	}
	newID := props["id"].(string)
	if newID != prev["id"] && !s.renames {
		return nil, BadRequest("The id in the body (%q) must match the %s's id (%q).", newID, s.kind, prev["id"])
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return nil, err
	}
	if newID != prev["id"] {
		if taken, err := s.exists(ctx, cat.store, newID); err != nil {
			return nil, err
		} else if taken {
			return nil, Conflict("A %s with id '%s' already exists. %s", s.kind, newID, msgConflict)
		}
	}
	return cat.writeChild(ctx, s, props, prev)
}

// deleteChild deletes child id under the If-Match rule; also, when not nil,
// adds the deletion's side effects (a user's permissions) to its batch. The
// caller holds catMu.
func (cat *catalog) deleteChild(ctx context.Context, s childSet, id, ifMatch string, also func(b storage.Batch, prev map[string]any) error) error {
	prev, _, err := s.read(ctx, cat.store, id)
	if err != nil {
		return err
	}
	if err := matchCatalogETag(ifMatch, prev["_etag"]); err != nil {
		return err
	}
	return cat.changeCatalog(ctx, func(b storage.Batch) error {
		if err := b.Delete(s.key(prev["id"].(string))); err != nil {
			return err
		}
		if s.ridIndex {
			rid, _ := rids.Decode(prev["_rid"].(string), s.ridLen)
			if err := b.Delete(keys.PrincipalRIDKey(rid)); err != nil {
				return err
			}
		}
		if also != nil {
			return also(b, prev)
		}
		return nil
	})
}

// writeChild stores props with its system properties: a new RID on a
// create (prev nil), prev's on a replace, and a new ETag and _ts. The
// caller holds catMu.
func (cat *catalog) writeChild(ctx context.Context, s childSet, props, prev map[string]any) (*Resource, error) {
	lsn, err := cat.lsns.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.lsns.finish(lsn)
	id := props["id"].(string)
	prevID, _ := prev["id"].(string)
	rid, _ := prev["_rid"].(string)
	if prev == nil {
		b, err := s.newRID(ctx, lsn)
		if err != nil {
			return nil, err
		}
		rid = rids.Encode(b)
	}
	cat.stamp(props, rid, s.self+rid+"/", lsn, s.salt)
	for k, v := range s.links {
		props[k] = v
	}
	body, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	err = cat.changeCatalog(ctx, func(b storage.Batch) error {
		if err := b.Set(s.key(id), body); err != nil {
			return err
		}
		renamed := prev != nil && prevID != id
		if renamed {
			// The record moves to its new key.
			if err := b.Delete(s.key(prevID)); err != nil {
				return err
			}
		}
		if !s.ridIndex || prev != nil && !renamed {
			return nil
		}
		// A new child, or a renamed one: its RID names its new key.
		ridBytes, _ := rids.Decode(rid, s.ridLen)
		return b.Set(keys.PrincipalRIDKey(ridBytes), s.key(id))
	})
	if err != nil {
		return nil, err
	}
	return &Resource{ID: id, RID: rid, Body: body, ETag: props["_etag"].(string)}, nil
}

// changeCatalog runs fn on one batch of catalog changes and commits it. On
// a shared store the batch also moves the catalog version that every
// gateway checks its cache against. The caller holds catMu for writing.
func (cat *catalog) changeCatalog(ctx context.Context, fn func(b storage.Batch) error) error {
	b, err := cat.catalogBatch()
	if err != nil {
		return err
	}
	defer b.Close()
	if err := fn(b); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// stamp sets the system properties of a catalog resource written with
// sequence number lsn: its RID, link, ETag (salted) and time.
func (cat *catalog) stamp(props map[string]any, rid, self string, lsn, salt uint64) {
	props["_rid"] = rid
	props["_self"] = self
	props["_etag"] = formatETag(lsn, salt)
	props["_ts"] = cat.now().Unix()
}

// inDatabase runs fn on database db (by name or RID) holding the catalog:
// for a change when write is set, else for a read of the store as it is
// now.
func inDatabase[T any](ctx context.Context, cat *catalog, db string, write bool, fn func(d *Database) (T, error)) (T, error) {
	var zero T
	if write {
		if err := cat.catMu.Lock(ctx); err != nil {
			return zero, err
		}
		defer cat.catMu.Unlock()
	} else {
		if err := cat.catMu.RLockCurrent(ctx); err != nil {
			return zero, err
		}
		defer cat.catMu.RUnlock()
	}
	d, err := cat.lookupDatabase(db)
	if err != nil {
		return zero, err
	}
	return fn(d)
}
