package engine

import (
	"bytes"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
)

// logChange records the side effects of one item write in the transaction's
// batch: the all-versions-and-deletes record of the change (in containers
// with a changeFeedPolicy; others have no such feed and pay for none), and
// the item's entry in the expiry index (where its container keeps one). cur is the new version (nil for a delete) and
// prev the stored version it replaces (nil for a create); a prev that had
// already expired is logged as deleted by TTL before cur is logged as created.
func (t *txn) logChange(cur, prev *storedItem) error {
	c := t.p.c
	// A write within the second of the one it replaces, both with an
	// expiry entry, keeps the entry it has: deleting and setting the same
	// key to the same item key cost the store two entries for nothing.
	ck := c.expiryKeyOf(cur)
	sameExpiry := false
	if pk := c.expiryKeyOf(prev); pk != nil {
		sameExpiry = ck != nil && bytes.Equal(prev.key, cur.key) && bytes.Equal(pk, ck)
		if !sameExpiry {
			if err := t.b.Delete(pk); err != nil {
				return err
			}
		}
	}
	logged := c.changeLogRetention() > 0
	if cur == nil {
		if !logged {
			return nil
		}
		return t.appendChange(&feed.Record{Op: feed.Delete, TTLExpired: t.expiring, Crts: t.now.Unix(),
			PrevLSN: prev.lsn, ItemKey: prev.key, Doc: prev.doc})
	}
	op := feed.Replace
	var prevLSN uint64
	switch {
	case !logged:
	case prev == nil:
		op = feed.Create
	case c.expired(prev, t.now.Unix()):
		op = feed.Create
		if err := t.appendChange(&feed.Record{Op: feed.Delete, TTLExpired: true, Crts: t.now.Unix(),
			PrevLSN: prev.lsn, ItemKey: prev.key, Doc: prev.doc}); err != nil {
			return err
		}
	default:
		prevLSN = prev.lsn
	}
	if logged {
		if err := t.appendChange(&feed.Record{Op: op, Crts: cur.ts, PrevLSN: prevLSN, ItemKey: cur.key, Doc: cur.doc}); err != nil {
			return err
		}
	}
	if ck == nil || sameExpiry {
		return nil
	}
	return t.b.Set(ck, cur.key)
}

func (t *txn) appendChange(r *feed.Record) error {
	r.LSN = t.lsn
	k := keys.VersionKey(t.p.c.rid, t.lsn, t.nlog)
	t.nlog++
	return t.b.Set(k, r.Encode())
}
