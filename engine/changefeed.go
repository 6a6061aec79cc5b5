package engine

import (
	"context"

	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// ChangeFeedMode selects what a change feed reports.
type ChangeFeedMode int

const (
	// LatestVersion reports each changed item once, as its latest version,
	// in modification order; deletes and expirations are not reported.
	LatestVersion ChangeFeedMode = iota
	// AllVersionsAndDeletes reports every create, replace and delete as its
	// own record, with metadata.
	AllVersionsAndDeletes
)

// Bounds on the work of one change feed request, so a narrowly scoped reader
// (one partition key of many, or a start time far ahead) gets bounded work
// per request: it answers 200 with what it found and resumes from where the
// scan stopped. Records outside the scope cost a key comparison; records in
// it cost a read.
const (
	maxChangeFeedScan    = 200000
	maxChangeFeedExamine = 10000
)

// ChangeFeedRequest asks for a page of a container's change feed.
type ChangeFeedRequest struct {
	Database  string
	Container string
	Mode      ChangeFeedMode
	// Continuation is the ETag of the previous page ("\"<lsn>\""). When it is
	// empty the feed starts from the beginning, from now (FromNow), or from
	// changes made at or after Since.
	Continuation string
	FromNow      bool
	Since        time.Time
	// PartitionKey scopes the feed to one logical partition when HasPartitionKey.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// MinEPK and MaxEPK scope the feed to the effective partition keys in
	// [MinEPK, MaxEPK), as upper-case hex; empty means unbounded.
	MinEPK, MaxEPK string
	// PartitionKeyRangeID scopes the feed to one partition key range
	// (x-ms-documentdb-partitionkeyrangeid); a range that was split answers
	// 410/1002. The continuation of a range is valid for its children.
	PartitionKeyRangeID string
	// MaxItems is the page size; zero or less means the default.
	MaxItems int
}

// ChangeFeedResult is one page of a change feed.
type ChangeFeedResult struct {
	// NotModified is true when there was nothing new (HTTP 304).
	NotModified bool
	// Items are the changed items (latest version) or change records (all
	// versions and deletes), in modification order.
	Items [][]byte
	// ETag is the continuation to send with the next request.
	ETag   string
	Charge float64
	// SessionLSN is the session token's LSN, read with the page's snapshot
	// on a shared store; 0 when the caller must ask SessionLSN.
	SessionLSN uint64
}

// FormatChangeFeedETag renders a change feed position as its ETag.
func FormatChangeFeedETag(lsn uint64) string { return `"` + strconv.FormatUint(lsn, 10) + `"` }

// parseChangeFeedETag reads a continuation ETag (quoted or bare decimal).
func parseChangeFeedETag(s string) (uint64, *Error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "W/")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, BadRequest("The change feed continuation %q is invalid: it must be the etag of an earlier change feed response.", s)
	}
	return n, nil
}

// EffectivePartitionKey returns the binary effective partition key of pk in a
// container with partition key definition def: the hash that orders items and
// that feed ranges (x-ms-start-epk, x-ms-end-epk) bound.
func EffectivePartitionKey(def *PartitionKeyDefinition, pk PartitionKey) []byte {
	return effectivePartitionKey(def, pk)
}

// changeScope decides which item keys a scoped change feed reports.
type changeScope struct {
	c      *Container
	prefix []byte // logical partition prefix, nil when unscoped
	bounds epkBounds
}

func (c *Container) changeScope(req *ChangeFeedRequest) (*changeScope, error) {
	s := &changeScope{c: c}
	if req.HasPartitionKey {
		prefix, perr := c.scope(req.PartitionKey, true)
		if perr != nil {
			return nil, perr
		}
		s.prefix = prefix
	}
	var err *Error
	if s.bounds, err = c.requestBounds(req.PartitionKeyRangeID, req.MinEPK, req.MaxEPK); err != nil {
		return nil, err
	}
	return s, nil
}

func parseEPKBound(h, name string) ([]byte, *Error) {
	if h == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, BadRequest("The %s value %q is not a hexadecimal effective partition key.", name, h)
	}
	return b, nil
}

func (s *changeScope) contains(itemKey []byte) bool {
	if s.prefix != nil && !bytes.HasPrefix(itemKey, s.prefix) {
		return false
	}
	return s.bounds.unbounded() || s.bounds.containsEPK(s.c.itemEPK(itemKey))
}

// changeFeedSettle bounds how long a change-feed read waits for open
// transactions older than the writes it must show.
const changeFeedSettle = 10 * time.Second

// ReadChangeFeed returns the next page of a container's change feed. It reads
// only up to the sequencer's watermark, below which every write has finished,
// so an entry that commits late with a lower sequence number is never passed
// over. On a shared store the watermark is the one of the page's snapshot,
// read in the round trip that opens it with the catalog check
// (itemsSnapshot), and it is the page's session token too.
func (e *Engine) ReadChangeFeed(ctx context.Context, req *ChangeFeedRequest) (*ChangeFeedResult, error) {
	var from uint64
	if req.Continuation != "" {
		n, perr := parseChangeFeedETag(req.Continuation)
		if perr != nil {
			return nil, perr
		}
		from = n
	}
	var horizonKey func(c *Container) [][]byte
	if req.Mode == AllVersionsAndDeletes {
		horizonKey = func(c *Container) [][]byte { return [][]byte{keys.VersionHorizon(c.rid)} }
	}
	// Writes acknowledged before this read must be in it, even behind an
	// older transaction still open; a script can hold one for its budget.
	c, snap, values, w, err := e.itemsSnapshot(ctx, req.Database, req.Container, horizonKey, changeFeedSettle)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	watermark := sessionLSN(w)
	session := e.seam.snapshotSession(watermark)
	if req.Mode == AllVersionsAndDeletes && c.changeLogRetention() == 0 {
		return nil, BadRequest("The all versions and deletes change feed mode requires the container's changeFeedPolicy with a retentionDuration; container '%s' has none.", c.ID)
	}
	scope, err := c.changeScope(req)
	if err != nil {
		return nil, err
	}
	if w := e.shared.scopeWatermark(c, snap, scope); w != 0 {
		// The scope lives in one place of several: that place's numbers
		// and watermark are its sequence.
		watermark = sessionLSN(w)
		session = e.seam.snapshotSession(watermark)
	}
	if req.Continuation == "" && req.FromNow {
		e.noteFeedRead(c, watermark)
		return &ChangeFeedResult{NotModified: true, ETag: FormatChangeFeedETag(watermark), Charge: 1, SessionLSN: session}, nil
	}
	if from >= watermark {
		e.noteFeedRead(c, min(from, watermark))
		return &ChangeFeedResult{NotModified: true, ETag: FormatChangeFeedETag(from), Charge: 1, SessionLSN: session}, nil
	}
	size := req.MaxItems
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	since := int64(0)
	if !req.Since.IsZero() {
		since = req.Since.Unix()
	}
	if req.Mode == AllVersionsAndDeletes {
		horizon, err := decodeChangeLogHorizon(values[0])
		if err != nil {
			return nil, err
		}
		if from < horizon {
			if req.Continuation != "" {
				return nil, BadRequest("The change feed continuation %s is outside the retention of all versions and deletes: the records up to %d have been removed. Start again from now.", req.Continuation, horizon)
			}
			from = horizon // the beginning is the oldest record kept
		}
	}
	page := &changePage{size: size, position: from}
	if req.Mode == AllVersionsAndDeletes {
		err = e.scanVersions(ctx, snap, c, scope, from, watermark, since, page)
	} else {
		err = e.scanLatest(ctx, snap, c, scope, from, watermark, since, page)
	}
	if err != nil {
		return nil, err
	}
	e.noteFeedRead(c, page.position)
	res := &ChangeFeedResult{Items: page.items, ETag: FormatChangeFeedETag(page.position),
		Charge: 1 + float64(page.bytes)/1024*0.1 + float64(page.examined)/1000, SessionLSN: session}
	res.NotModified = len(page.items) == 0 && !page.capped
	return res, nil
}

// changePage collects one page. A page ends only between sequence numbers:
// the continuation says "everything at or below position is done", so the
// records of one transaction are never split across pages.
type changePage struct {
	size     int
	items    [][]byte
	bytes    int
	scanned  int    // records passed over
	examined int    // records read in scope
	position uint64 // last sequence number fully covered
	capped   bool   // stopped early with more left to read
	lastLSN  uint64
}

// next reports whether the record at lsn may still go into the page; when
// not, the page is complete at the previous sequence number.
func (p *changePage) next(lsn uint64) bool {
	if lsn != p.lastLSN {
		// Every record of the previous sequence number has been seen.
		if p.lastLSN != 0 {
			p.position = p.lastLSN
		}
		if len(p.items) >= p.size || p.scanned >= maxChangeFeedScan || p.examined >= maxChangeFeedExamine {
			p.capped = true
			return false
		}
		p.lastLSN = lsn
	}
	p.scanned++
	return true
}

func (p *changePage) add(doc []byte) {
	p.items = append(p.items, doc)
	p.bytes += len(doc)
}

// finish closes a page whose scan reached upto without being capped.
func (p *changePage) finish(upto uint64) {
	if !p.capped {
		p.position = upto
	}
}

func lsnRange(prefix []byte, from, upto uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), from+1)
	upper = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), upto+1)
	return lower, upper
}

// scanLatest fills page from the latest-version index: items whose current
// version has a sequence number in (from, upto], skipping expired ones. It
// reads the index a chunk at a time, then the chunk's items in scope in one
// go (storage.GetMany).
func (e *Engine) scanLatest(ctx context.Context, r storage.Reader, c *Container, scope *changeScope, from, upto uint64, since int64, page *changePage) error {
	prefix := keys.FeedPrefix(c.rid)
	lower, upper := lsnRange(prefix, from, upto)
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return err
	}
	defer it.Close()
	now := e.now().Unix()
	err = lookupChunks(ctx, r, it, scope.contains, func(k, itemKey, v []byte) (bool, error) {
		if len(k) < len(prefix)+8 {
			return false, errors.New("engine: corrupt change feed key")
		}
		if !page.next(binary.BigEndian.Uint64(k[len(prefix):])) {
			return false, nil
		}
		if itemKey == nil {
			return true, nil
		}
		page.examined++
		if v == nil {
			return true, nil
		}
		s, err := decodeItem(itemKey, v)
		if err != nil {
			return false, err
		}
		if !c.expired(s, now) && s.ts >= since {
			page.add(withLSN(s.doc, s.lsn))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	page.finish(upto)
	return nil
}

// maxChangeFeedChunk is the most items a change-feed scan reads in one go.
const maxChangeFeedChunk = 256

// lookupChunks visits the entries of it, which name items (the entry's
// value is the item's key), and reads the items a chunk at a time, each
// chunk's in one go (storage.GetMany; chunks of lookupChunk). An entry
// whose item inScope refuses is visited with a nil item key and value;
// an absent item has a nil value. visit returns false to stop.
func lookupChunks(ctx context.Context, r storage.Reader, it storage.Iterator, inScope func(itemKey []byte) bool, visit func(key, itemKey, value []byte) (bool, error)) error {
	type entry struct {
		key, itemKey []byte // itemKey nil: out of scope
	}
	var entries []entry
	var keys [][]byte
	for first, more := true, true; more; first = false {
		entries, keys = entries[:0], keys[:0]
		// Entries out of scope cost a comparison: a chunk holds a bounded
		// number of them besides the ones whose items it reads.
		for n := lookupChunk(r, first); len(keys) < n && len(entries) < 4*maxChangeFeedChunk; {
			if !it.Next() {
				more = false
				break
			}
			en := entry{key: bytes.Clone(it.Key())}
			if itemKey := it.Value(); inScope(itemKey) {
				en.itemKey = bytes.Clone(itemKey)
				keys = append(keys, en.itemKey)
			}
			entries = append(entries, en)
		}
		if err := it.Err(); err != nil {
			return err
		}
		var values [][]byte
		if len(keys) > 0 {
			var err error
			if values, err = storage.GetMany(ctx, r, keys); err != nil {
				return err
			}
		}
		next := 0
		for _, en := range entries {
			var v []byte
			if en.itemKey != nil {
				v = values[next]
				next++
			}
			if ok, err := visit(en.key, en.itemKey, v); err != nil || !ok {
				return err
			}
		}
	}
	return nil
}

// scanVersions fills page from the all-versions-and-deletes log.
func (e *Engine) scanVersions(ctx context.Context, r storage.Reader, c *Container, scope *changeScope, from, upto uint64, since int64, page *changePage) error {
	prefix := keys.VersionPrefix(c.rid)
	lower, upper := lsnRange(prefix, from, upto)
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			return errors.New("engine: corrupt change log key")
		}
		lsn := binary.BigEndian.Uint64(k[len(prefix):])
		if !page.next(lsn) {
			return nil
		}
		rec, err := decodeChangeRecord(lsn, it.Value())
		if err != nil {
			return err
		}
		if !scope.contains(rec.itemKey) || rec.crts < since {
			continue
		}
		page.examined++
		page.add(c.avadDocument(rec))
	}
	if err := it.Err(); err != nil {
		return err
	}
	page.finish(upto)
	return nil
}

// withLSN returns a copy of an item's JSON with its _lsn system property,
// as the change feed carries it.
func withLSN(doc []byte, lsn uint64) []byte {
	end := bytes.LastIndexByte(doc, '}')
	if end < 0 {
		return append([]byte(nil), doc...)
	}
	out := make([]byte, 0, len(doc)+32)
	out = append(out, doc[:end]...)
	if t := bytes.TrimSpace(doc[:end]); len(t) > 0 && t[len(t)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, `"_lsn":`...)
	out = strconv.AppendUint(out, lsn, 10)
	return append(out, doc[end:]...)
}
