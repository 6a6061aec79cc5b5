package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// Unique keys. A container's uniqueKeyPolicy names sets of paths whose
// values, together, no two items of one logical partition may share. Each
// item has one entry per unique key in the unique-key index, written in
// the same transaction as the item under the partition's write lock, so
// the check and the write are one atomic step and concurrent writers of a
// partition cannot both pass it:
//
//	Q<coll rid 8><pk len uvarint><pk><key number 1><values> → item key  (keys.Unique)
//
// As in the service, a missing value counts as null (so one item only may
// lack a unique path), values compare as JSON values (1 and 1.0 are
// equal; strings exactly, case included), and expired items do not count.

// msgUniqueViolation is the service's message for a unique key conflict.
const msgUniqueViolation = "Unique index constraint violation."

// uniqueIndex is the unique-key entries of one logical partition as a
// write transaction (txn.go) sees them: its batch, which reads its own
// writes, its partition and its time.
type uniqueIndex struct {
	b   storage.Batch
	p   *partition
	now time.Time
}

// uniqueEntries returns an item's unique-key index keys, one per unique
// key of the container.
func (t uniqueIndex) uniqueEntries(obj jsondoc.Object) ([][]byte, error) {
	c := t.p.c
	base := keys.UniquePartitionPrefix(c.rid, t.p.enc)
	out := make([][]byte, 0, len(c.unique))
	for i, key := range c.unique {
		k := append(append([]byte(nil), base...), byte(i))
		for _, path := range key {
			raw, err := lookupObjectPath(obj, path)
			if err != nil {
				return nil, err
			}
			if k, err = appendUniqueValue(k, raw); err != nil {
				return nil, err
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// lookupObjectPath returns the raw value at path, nil when absent.
func lookupObjectPath(obj jsondoc.Object, path []string) (json.RawMessage, error) {
	cur := obj
	for i, name := range path {
		raw, ok := cur.Get(name)
		if !ok {
			return nil, nil
		}
		if i == len(path)-1 {
			return raw, nil
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, nil
		}
		next, err := jsondoc.Parse(raw)
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return nil, nil
}

// appendUniqueValue appends a value's encoding: its type, then the value
// exactly (strings are not cut as index values are). Absent is null.
func appendUniqueValue(k []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(k, ixNull), nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		k = binary.AppendUvarint(append(k, ixString), uint64(len(s)))
		return append(k, s...), nil
	case '{', '[':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		k = binary.AppendUvarint(append(k, raw[0]), uint64(buf.Len()))
		return append(k, buf.Bytes()...), nil
	case 'n', 't', 'f':
		return appendRawIndexValue(k, raw)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, err
	}
	return appendIndexNumber(k, f), nil
}

// putUnique updates the unique-key index for an item written at itemKey
// (obj its new properties, prevObj its previous document, parsed, or nil),
// and fails with 409 when another live item of the partition holds one of
// its unique values.
func (t uniqueIndex) putUnique(ctx context.Context, itemKey []byte, obj, prevObj jsondoc.Object) error {
	if len(t.p.c.unique) == 0 {
		return nil
	}
	cur, err := t.uniqueEntries(obj)
	if err != nil {
		return err
	}
	var old [][]byte
	if prevObj != nil {
		if old, err = t.uniqueEntries(prevObj); err != nil {
			return err
		}
	}
	for i, k := range cur {
		if i < len(old) && bytes.Equal(old[i], k) {
			continue
		}
		owner, err := t.b.Get(ctx, k)
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return err
		case !bytes.Equal(owner, itemKey):
			live, err := t.liveItemAt(ctx, owner)
			if err != nil {
				return err
			}
			if live {
				return &Error{Status: 409, Code: "Conflict", Message: msgUniqueViolation}
			}
		}
	}
	for i, k := range old {
		if i < len(cur) && bytes.Equal(cur[i], k) {
			continue
		}
		if err := t.deleteUniqueOf(ctx, k, itemKey); err != nil {
			return err
		}
	}
	for i, k := range cur {
		if i < len(old) && bytes.Equal(old[i], k) {
			continue
		}
		if err := t.b.Set(k, itemKey); err != nil {
			return err
		}
	}
	return nil
}

// removeUnique drops the unique-key entries of a deleted item (obj its
// document, parsed).
func (t uniqueIndex) removeUnique(ctx context.Context, itemKey []byte, obj jsondoc.Object) error {
	if len(t.p.c.unique) == 0 {
		return nil
	}
	entries, err := t.uniqueEntries(obj)
	if err != nil {
		return err
	}
	for _, k := range entries {
		if err := t.deleteUniqueOf(ctx, k, itemKey); err != nil {
			return err
		}
	}
	return nil
}

// deleteUniqueOf deletes entry k if it still names itemKey (an expired
// item's entry may have been taken over by a newer item).
func (t uniqueIndex) deleteUniqueOf(ctx context.Context, k, itemKey []byte) error {
	owner, err := t.b.Get(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(owner, itemKey) {
		return nil
	}
	return t.b.Delete(k)
}

// liveItemAt reports whether the item stored at key exists and has not
// expired.
func (t uniqueIndex) liveItemAt(ctx context.Context, key []byte) (bool, error) {
	v, err := t.b.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	it, err := decodeItem(key, v)
	if err != nil {
		return false, err
	}
	return !t.p.c.expired(it, t.now.Unix()), nil
}
