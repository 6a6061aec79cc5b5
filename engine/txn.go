package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/storage"
)

// The transaction machinery of item writes: a transaction on one logical
// partition under the partition's lock, its reads of its own writes, the
// sequence number it allocates, the records, index, feed and change entries
// a put or a remove writes, and the wait for durability at commit.

// txn is a write transaction on one logical partition: reads see its own
// writes, and everything commits together or not at all.
type txn struct {
	// indexes is the engine's search indexes (searchindex.go).
	indexes *searchIndexes
	// presence is the seam's presence filter, lsns its LSN source, and
	// noCreationOrder the seam's (withoutCreationOrder).
	presence        presenceSeam
	lsns            lsnSource
	noCreationOrder bool
	p               *partition
	b               storage.Batch
	now             time.Time
	lsn             uint64
	nrids           uint64
	writes          uint16
	// nlog numbers the change records the transaction writes.
	nlog uint32
	// expiring marks the deletes of the TTL sweeper.
	expiring bool
	// sb is b on a shared store: the sequence number comes from it.
	sb storage.SharedBatch
	// session is the session LSN read with the commit on a shared store.
	session uint64
	// pre is the item a shared transaction read as it began.
	pre *prefetched
	// search is its pending search index changes (searchindex.go).
	search searchindex.Write
	// read and written are room for the first record the transaction
	// reads (getAny) and the first it writes (put), each used once: a
	// single write's records in its transaction's allocation.
	read, written         storedItem
	readUsed, writtenUsed bool
	// itemRoom, when not nil, is an item the transaction's first patch
	// parses its new version into (the room runAloneSession has for a
	// body), instead of allocating one.
	itemRoom *item
	// plainSets makes insert a Set: a transaction run again after the
	// store refused a key it wrote as new (storage.ErrExists).
	plainSets bool
}

// insert writes key, which the transaction knows is new (it carries the
// transaction's own sequence number, or is a created item's record or
// index entry, read absent under the partition's lock), as new: a store
// that checks (storage.Inserter) writes it more cheaply than a Set (a
// plain INSERT on PostgreSQL, not an upsert), and refuses the commit if
// it exists, never overwriting it.
func (t *txn) insert(key, value []byte) error {
	if t.plainSets {
		return t.b.Set(key, value)
	}
	return storage.Insert(t.b, key, value)
}

// setNew is insert when fresh, else Set.
func (t *txn) setNew(key, value []byte, fresh bool) error {
	if fresh {
		return t.insert(key, value)
	}
	return t.b.Set(key, value)
}

// presenceSeam is the seam's presence filter: absent reports whether an
// item key was certainly never written, notePresent records a key written.
type presenceSeam interface {
	absent(c *Container, key []byte) bool
	notePresent(c *Container, key []byte)
}

// get reads an item of the partition; nil when absent or expired.
func (t *txn) get(ctx context.Context, id string) (*storedItem, error) {
	it, err := t.getAny(ctx, id)
	if err != nil || it == nil || t.p.c.expired(it, t.now.Unix()) {
		return nil, err
	}
	return it, nil
}

// getAny reads an item even if it has expired (a write replaces or removes
// the stale record).
func (t *txn) getAny(ctx context.Context, id string) (*storedItem, error) {
	key := t.p.itemKey(id)
	if t.presence.absent(t.p.c, key) {
		return nil, nil
	}
	if v, ok := t.prefetchedValue(key); ok {
		if v == nil {
			return nil, nil
		}
		return t.decodeItem(key, v)
	}
	v, err := t.b.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t.decodeItem(key, v)
}

// decodeItem is decodeItem, the first record the transaction reads
// decoded in its room (t.read).
func (t *txn) decodeItem(key, v []byte) (*storedItem, error) {
	if t.readUsed {
		return decodeItem(key, v)
	}
	if err := decodeItemInto(&t.read, key, v); err != nil {
		return nil, err
	}
	t.readUsed = true
	return &t.read, nil
}

func (t *txn) allocate(ctx context.Context) error {
	if t.lsn != 0 {
		return nil
	}
	if t.sb != nil {
		lsn, err := t.sb.Sequence(ctx)
		if err != nil {
			return err
		}
		t.lsn = lsn
		t.lsns.handedOut(lsn)
		return nil
	}
	lsn, err := t.lsns.allocate(ctx)
	if err != nil {
		return err
	}
	t.lsn = lsn
	return nil
}

// itemKeyOf is the storage key of the partition's item id: prev's key when
// prev (the record a write replaces, read by getAny under the same key) is
// that item's, else a new one. Keys are never written to after they are
// built, so the two records may share one.
func (t *txn) itemKeyOf(id string, prev *storedItem) []byte {
	if prev != nil && len(prev.key) == len(t.p.prefix)+len(id) &&
		string(prev.key[len(t.p.prefix):]) == id && bytes.HasPrefix(prev.key, t.p.prefix) {
		return prev.key
	}
	return t.p.itemKey(id)
}

// put writes the item, replacing prev (the current record, expired or not,
// or nil), and returns the stored record.
func (t *txn) put(ctx context.Context, it *item, prev *storedItem) (*storedItem, error) {
	if err := t.allocate(ctx); err != nil {
		return nil, err
	}
	c := t.p.c
	// The first record written is in the transaction's room (t.written).
	s := &t.written
	if t.writtenUsed {
		s = new(storedItem)
	}
	t.writtenUsed = true
	*s = storedItem{key: t.itemKeyOf(it.id, prev), lsn: t.lsn, ts: t.now.Unix(), ttl: it.ttl, write: t.writes}
	t.writes++
	fresh := prev == nil
	if fresh {
		s.rid = t.lsn<<16 | t.nrids
		t.nrids++
	} else {
		s.rid = prev.rid
	}
	// The write's scratch: the storage batch copies what it is given. A
	// container with search indexes has its document's values kept past
	// the write (t.search), so they are not built in it.
	sc := writeScratchPool.Get().(*writeScratch)
	defer sc.release()
	pooled := c.Search() == nil
	// The system properties' values, written once into one buffer:
	// "<rid>", "dbs/<db rid>/colls/<coll rid>/docs/<rid>/", "\"<etag>\"", <ts>.
	var ridBuf [16]byte
	sys := sc.sys[:0]
	if need := 2*24 + len(c.db.RID) + len(c.RID) + 18 + etagLen + 4 + 20; !pooled || cap(sys) < need {
		sys = make([]byte, 0, need)
	}
	sys = append(sys, '"')
	sys = rids.Append(sys, binary.BigEndian.AppendUint64(append(ridBuf[:0], c.rid...), s.rid))
	sys = append(sys, '"')
	ridEnd := len(sys)
	sys = append(sys, `"dbs/`...)
	sys = append(sys, c.db.RID...)
	sys = append(sys, "/colls/"...)
	sys = append(sys, c.RID...)
	sys = append(sys, "/docs/"...)
	sys = append(sys, sys[1:ridEnd-1]...)
	sys = append(sys, `/"`...)
	selfEnd := len(sys)
	// The ETag is formatted once: the record's "_etag" here, and the
	// write's answer (writeResult's s.etag()) from the record's allocation
	// below.
	var etagBuf [etagLen]byte
	etag := s.appendETag(etagBuf[:0])
	sys = append(sys, '"', '\\')
	sys = append(sys, etag[:etagLen-1]...)
	sys = append(sys, '\\', '"', '"')
	etagEnd := len(sys)
	sys = strconv.AppendInt(sys, s.ts, 10)
	if pooled {
		sc.sys = sys
	}
	ts := jsondoc.Field{Name: "_ts", Value: json.RawMessage(sys[etagEnd:])}
	// The link is plain text (written as it is) when the database's and
	// the container's RIDs are: the item's is base64 (rids.Append).
	self := json.RawMessage(sys[ridEnd:selfEnd])
	if !jsondoc.IsPlainText(c.db.RID) || !jsondoc.IsPlainText(c.RID) {
		self = jsondoc.AppendString(nil, c.Self()+"docs/"+string(sys[1:ridEnd-1])+"/")
	}
	// The record is the header and the document, in one buffer; the system
	// properties follow the item's, as object.encode would write them.
	// The ETag's text leads the allocation, ahead of the record (which
	// only appends after it): written once here and never again, it is
	// the write's ETag string without an allocation of its own.
	buf := make([]byte, etagLen, etagLen+itemHeaderLen+it.obj.EncodedLen()+len(sys)+64)
	copy(buf, etag)
	s.etagText = unsafe.String(&buf[0], etagLen)
	rec := it.obj.AppendEncode(s.appendHeader(buf[etagLen:etagLen]))
	rec = rec[:len(rec)-1] // '}'
	if len(it.obj) > 0 {
		rec = append(rec, ',')
	}
	rec = append(append(rec, `"_rid":`...), sys[:ridEnd]...)
	rec = append(append(rec, `,"_self":`...), self...)
	rec = append(append(rec, `,"_etag":`...), sys[selfEnd:etagEnd]...)
	rec = append(rec, `,"_attachments":"attachments/"`...)
	rec = append(append(rec, `,"_ts":`...), ts.Value...)
	rec = append(rec, '}')
	s.doc = rec[itemHeaderLen:len(rec):len(rec)]
	if len(s.doc) > MaxItemBytes {
		return nil, TooLarge("%s\r\nThe item is %d bytes with its system properties, the limit is %d.", msgEntityTooLarge, len(s.doc), MaxItemBytes)
	}
	prevObj, err := t.parsePrev(sc, prev, it.obj)
	if err != nil {
		return nil, err
	}
	if err := (uniqueIndex{b: t.b, p: t.p, now: t.now}).putUnique(ctx, s.key, it.obj, prevObj); err != nil {
		return nil, err
	}
	var ridBuf8 [8]byte
	ridBytes := binary.BigEndian.AppendUint64(ridBuf8[:0], s.rid)
	// The feed, RID and order keys are built one after another in one
	// buffer: the batch copies what it is given.
	kb := sc.keys[:0]
	if need := 2*len(c.rid) + len(t.p.prefix) + 48; cap(kb) < need {
		kb = make([]byte, 0, need)
		sc.keys = kb
	}
	t.presence.notePresent(c, s.key)
	t.forgetPrefetched(s.key)
	if err := t.setNew(s.key, rec, fresh); err != nil {
		return nil, err
	}
	// The stored document is the item's properties and the system ones, of
	// which only _ts is indexed.
	var doc jsondoc.Object
	if pooled {
		doc = append(append(sc.doc[:0], it.obj...), ts)
		sc.doc = doc
	} else {
		doc = append(it.obj[:len(it.obj):len(it.obj)], ts)
	}
	if err := t.reindex(sc, s.key, prevObj, doc); err != nil {
		return nil, err
	}
	if prev != nil {
		if err := t.b.Delete(keys.AppendFeedKey(kb[:0], c.rid, prev.lsn, ridBytes)); err != nil {
			return nil, err
		}
	}
	// The feed key carries the write's sequence number, the RID and
	// order keys its new RID: new keys.
	if err := t.insert(keys.AppendFeedKey(kb[:0], c.rid, s.lsn, ridBytes), s.key); err != nil {
		return nil, err
	}
	if fresh {
		if err := t.insert(keys.AppendRIDKey(kb[:0], c.rid, ridBytes), s.key); err != nil {
			return nil, err
		}
		if !t.noCreationOrder {
			if err := t.insert(keys.AppendOrderKey(kb[:0], t.p.prefix, s.rid), s.key); err != nil {
				return nil, err
			}
		}
	}
	if err := t.logChange(s, prev); err != nil {
		return nil, err
	}
	return s, nil
}

// remove deletes the item whose current record is prev.
func (t *txn) remove(ctx context.Context, prev *storedItem) error {
	if err := t.allocate(ctx); err != nil {
		return err
	}
	c := t.p.c
	sc := writeScratchPool.Get().(*writeScratch)
	defer sc.release()
	prevObj, err := t.parsePrev(sc, prev, nil)
	if err != nil {
		return err
	}
	if err := t.reindex(sc, prev.key, prevObj, nil); err != nil {
		return err
	}
	if err := (uniqueIndex{b: t.b, p: t.p, now: t.now}).removeUnique(ctx, prev.key, prevObj); err != nil {
		return err
	}
	ridBytes := binary.BigEndian.AppendUint64(nil, prev.rid)
	t.forgetPrefetched(prev.key)
	for _, k := range [][]byte{prev.key, keys.FeedKey(c.rid, prev.lsn, ridBytes), keys.RIDKey(c.rid, ridBytes), keys.OrderKey(t.p.prefix, prev.rid)} {
		if err := t.b.Delete(k); err != nil {
			return err
		}
	}
	return t.logChange(nil, prev)
}

// parsePrev parses the stored document of prev, the version a write
// replaces or removes, once for its unique-key and index entries; nil
// when there is none, or when the container keeps neither. The object is
// listed in sc's array: it is done with when the write is. Its names are
// taken from names (the new version's properties, nil for a remove) and
// the system properties' where they are the same, not copied.
func (t *txn) parsePrev(sc *writeScratch, prev *storedItem, names jsondoc.Object) (jsondoc.Object, error) {
	c := t.p.c
	if prev == nil || len(c.unique) == 0 && (c.index == nil || c.index.None) {
		return nil, nil
	}
	obj, err := jsondoc.ParseNamed(sc.prev, prev.doc, storedFields, names)
	if cap(obj) > 0 {
		sc.prev = obj[:0]
	}
	return obj, err
}

// storedFields is the room parsePrev makes for a stored record's
// properties: the five system ones and up to 11 of the item's.
const storedFields = 16

// reindex replaces an item's index entries in the transaction: the entries
// of prevObj (nil when new) are removed and those of doc (nil when
// deleted) added. Both are parsed: the write path has them so.
func (t *txn) reindex(sc *writeScratch, key []byte, prevObj, doc jsondoc.Object) error {
	c := t.p.c
	if err := t.indexes.reindex(&t.search, c, t.b, t.lsn, key, doc); err != nil {
		return err
	}
	if c.index == nil || c.index.None {
		return nil
	}
	// Both versions' entries are built in the write's scratch.
	old, cur := sc.old[:0], sc.cur[:0]
	var err error
	switch {
	case prevObj != nil && doc != nil:
		// A replace lists the entries of the properties it changed only:
		// those of the others are the same in both versions.
		var oldFields, curFields jsondoc.Object
		oldFields, curFields, sc.fields = changedFieldsIn(sc.fields, prevObj, doc)
		if old, err = c.appendFieldIndexEntries(sc, old, oldFields, prevObj, key); err != nil {
			return err
		}
		if cur, err = c.appendFieldIndexEntries(sc, cur, curFields, doc, key); err != nil {
			return err
		}
	case prevObj != nil:
		if old, err = c.appendFieldIndexEntries(sc, old, prevObj, prevObj, key); err != nil {
			return err
		}
	case doc != nil:
		if cur, err = c.appendFieldIndexEntries(sc, cur, doc, doc, key); err != nil {
			return err
		}
	}
	sc.old, sc.cur = old, cur
	// Both lists sorted, the entries only in old are deleted and those only
	// in cur written; an entry in both is left as it is.
	slices.SortFunc(old, bytes.Compare)
	slices.SortFunc(cur, bytes.Compare)
	j := 0
	for i, k := range old {
		if i > 0 && bytes.Equal(k, old[i-1]) {
			continue
		}
		for j < len(cur) && bytes.Compare(cur[j], k) < 0 {
			j++
		}
		if j < len(cur) && bytes.Equal(cur[j], k) {
			continue
		}
		if err := t.b.Delete(k); err != nil {
			return err
		}
	}
	// A created item's entries are new: an item's entries are removed
	// with it, and it was read absent under the partition's lock.
	i := 0
	for j, k := range cur {
		if j > 0 && bytes.Equal(k, cur[j-1]) {
			continue
		}
		for i < len(old) && bytes.Compare(old[i], k) < 0 {
			i++
		}
		if i < len(old) && bytes.Equal(old[i], k) {
			continue
		}
		if err := t.setNew(k, nil, prevObj == nil); err != nil {
			return err
		}
	}
	return nil
}

// prefetched is the keys a shared transaction read as it began, under its
// partition's lock, and their values (nil: absent), for its first read of
// each: no other transaction can change an item of the partition before it
// ends. A few (a write's item) are looked up one by one, with no map and
// no string made of each key; many (a transactional batch's) by a map.
type prefetched struct {
	keys, values [][]byte // a key forgotten is nil
	byKey        map[string][]byte
}

// prefetchedFewest is the most keys prefetched looks up one by one.
const prefetchedFewest = 8

func newPrefetched(keys, values [][]byte) *prefetched {
	if len(keys) <= prefetchedFewest {
		return &prefetched{keys: keys, values: values}
	}
	m := make(map[string][]byte, len(keys))
	for i, key := range keys {
		m[string(key)] = values[i]
	}
	return &prefetched{byKey: m}
}

// prefetchedValue returns the value key had as the transaction began, if
// it was read then and the transaction has not written it since (put and
// remove forget it: the batch's own write is the answer then).
func (t *txn) prefetchedValue(key []byte) (value []byte, ok bool) {
	if t.pre == nil {
		return nil, false
	}
	if t.pre.byKey != nil {
		value, ok = t.pre.byKey[string(key)]
		return value, ok
	}
	for i, k := range t.pre.keys {
		if k != nil && bytes.Equal(k, key) {
			return t.pre.values[i], true
		}
	}
	return nil, false
}

// forgetPrefetched drops key's prefetched value, which the transaction's
// write of key makes stale.
func (t *txn) forgetPrefetched(key []byte) {
	if t.pre == nil {
		return
	}
	if t.pre.byKey != nil {
		delete(t.pre.byKey, string(key))
		return
	}
	for i, k := range t.pre.keys {
		if k != nil && bytes.Equal(k, key) {
			t.pre.keys[i] = nil
		}
	}
}

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
	return t.insert(k, r.Encode()) // the sequence number's own
}
