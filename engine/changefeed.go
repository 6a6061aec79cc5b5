package engine

import (
	"context"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
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
func FormatChangeFeedETag(lsn uint64) string { return feed.FormatETag(lsn) }

// EffectivePartitionKey returns the binary effective partition key of pk in a
// container with partition key definition def: the one that feed ranges
// (x-ms-start-epk, x-ms-end-epk) and partition key ranges bound, which for
// hash partitioning V1 is not the hash that orders items.
func EffectivePartitionKey(def *PartitionKeyDefinition, pk PartitionKey) []byte {
	if def.Version != 2 {
		return pk.EPKV1()
	}
	return effectivePartitionKey(def, pk)
}

// changeScope is the scope of a change feed request: a logical partition,
// a partition key range and an effective partition key span in it.
func (c *Container) changeScope(req *ChangeFeedRequest) (*feed.Scope, error) {
	s := &feed.Scope{C: c.feedContainer()}
	if req.HasPartitionKey {
		prefix, perr := c.scope(req.PartitionKey, true)
		if perr != nil {
			return nil, perr
		}
		s.Prefix = prefix
	}
	bounds, err := c.partitionBounds(req.HasPartitionKey, req.PartitionKeyRangeID, req.MinEPK, req.MaxEPK)
	if err != nil {
		return nil, err
	}
	if !bounds.unbounded() {
		s.InRange = bounds.containsEPK
		if c.hashV1() {
			s.EPK = c.rangeEPK
		}
		s.Min, s.Max = bounds.min, bounds.max
	}
	return s, nil
}

// feedContainer is what the change feed knows of the container.
func (c *Container) feedContainer() feed.Container {
	return feed.Container{RID: c.rid, Paths: c.pk.Paths}
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
		n, ok := feed.ParseETag(req.Continuation)
		if !ok {
			return nil, BadRequest("The change feed continuation %q is invalid: it must be the etag of an earlier change feed response.", req.Continuation)
		}
		from = n
	}
	var horizonKey func(c *Container) [][]byte
	if req.Mode == AllVersionsAndDeletes {
		horizonKey = func(c *Container) [][]byte { return [][]byte{keys.VersionHorizon(c.rid)} }
	}
	// Writes acknowledged before this read must be in it, on whichever
	// gateway they were made, even behind an older transaction still
	// open; a script can hold one for its budget.
	c, snap, values, w, err := e.seam.itemsSnapshot(ctx, req.Database, req.Container, horizonKey, changeFeedSettle)
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
		e.feedReads.note(c, watermark)
		return &ChangeFeedResult{NotModified: true, ETag: FormatChangeFeedETag(watermark), Charge: 1, SessionLSN: session}, nil
	}
	if from >= watermark {
		e.feedReads.note(c, min(from, watermark))
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
		horizon, err := feed.DecodeHorizon(values[0])
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
	page := &feed.Page{Size: size, Position: from}
	if req.Mode == AllVersionsAndDeletes {
		err = feed.ScanVersions(ctx, snap, scope, from, watermark, since, page)
	} else {
		now := e.now().Unix()
		err = feed.ScanLatest(ctx, snap, scope, from, watermark, page, func(itemKey, v []byte) ([]byte, error) {
			s, err := decodeItem(itemKey, v)
			if err != nil || c.expired(s, now) || s.ts < since {
				return nil, err
			}
			return feed.WithLSN(s.doc, s.lsn), nil
		})
	}
	if err != nil {
		return nil, err
	}
	e.feedReads.note(c, page.Position)
	res := &ChangeFeedResult{Items: page.Items, ETag: FormatChangeFeedETag(page.Position),
		Charge: 1 + float64(page.Bytes)/1024*0.1 + float64(page.Examined)/1000, SessionLSN: session}
	res.NotModified = len(page.Items) == 0 && !page.Capped
	return res, nil
}
