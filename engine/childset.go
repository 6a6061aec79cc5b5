package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// A set of catalog children (see children.go) as stored: where its records
// are and how one is read, listed or found by RID, with no engine state;
// the writes, which take the catalog lock and a sequence number, are in
// children.go.

// childSet is the children of one kind under one parent.
type childSet struct {
	// kind names one child in messages ("user", "stored procedure").
	kind string
	// prefix is the key prefix of the records; a child's key is prefix+id.
	prefix []byte
	// self is the _self of the parent's feed of this kind: a child's _self
	// is self + its RID + "/".
	self string
	// ridLen is the length in bytes of a child's RID.
	ridLen int
	// salt is the salt of a child's ETags (formatETag).
	salt uint64
	// links are the system properties a child carries that name its own
	// children's feeds (a user's "_permissions": "permissions/").
	links map[string]string
	// ridIndex says a child's RID resolves through keys.PrincipalRIDKey;
	// without it a read by RID scans the parent's children.
	ridIndex bool
	// renames says a replace with another id renames the child (the RID
	// stays), as the service does for users and permissions; without it
	// the ids must match (400).
	renames bool
	// newRID makes the RID of a child created with sequence number lsn.
	// The caller holds catMu.
	newRID func(ctx context.Context, lsn uint64) ([]byte, error)
}

func (s childSet) key(id string) []byte {
	return append(append([]byte(nil), s.prefix...), id...)
}

// childResource is the resource of a stored child record.
func childResource(props map[string]any, raw []byte) *Resource {
	id, _ := props["id"].(string)
	rid, _ := props["_rid"].(string)
	etag, _ := props["_etag"].(string)
	return &Resource{ID: id, RID: rid, Body: raw, ETag: etag}
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

// list returns the children, ordered by id, with their decoded props.
func (s childSet) list(ctx context.Context, r storage.Reader) ([]*Resource, []map[string]any, error) {
	it, err := r.NewIterator(ctx, s.prefix, storage.PrefixEnd(s.prefix), false)
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
		out = append(out, childResource(m, raw))
		props = append(props, m)
	}
	return out, props, it.Err()
}

// read returns a child's props and record by id, else by RID; 404 when
// neither names one.
func (s childSet) read(ctx context.Context, r storage.Reader, id string) (map[string]any, []byte, error) {
	raw, err := r.Get(ctx, s.key(id))
	if rid, isRID := rids.Decode(id, s.ridLen); errors.Is(err, storage.ErrNotFound) && isRID {
		raw, err = s.readByRID(ctx, r, rid)
	}
	return storedProps(raw, err, s.kind, id)
}

func (s childSet) readByRID(ctx context.Context, r storage.Reader, rid []byte) ([]byte, error) {
	if s.ridIndex {
		key, err := r.Get(ctx, keys.PrincipalRIDKey(rid))
		if err != nil {
			return nil, err
		}
		if len(key) <= len(s.prefix) || string(key[:len(s.prefix)]) != string(s.prefix) {
			return nil, storage.ErrNotFound
		}
		return r.Get(ctx, key)
	}
	list, _, err := s.list(ctx, r)
	if err != nil {
		return nil, err
	}
	want := rids.Encode(rid)
	for _, c := range list {
		if c.RID == want {
			return c.Body, nil
		}
	}
	return nil, storage.ErrNotFound
}

// exists reports whether a child has the id (not a RID).
func (s childSet) exists(ctx context.Context, r storage.Reader, id string) (bool, error) {
	_, err := r.Get(ctx, s.key(id))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
