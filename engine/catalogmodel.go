package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/engine/internal/presence"
	"github.com/orrery-db/orrery/engine/internal/uniquepolicy"
	"github.com/orrery-db/orrery/query"
)

// The catalog's values: a database, a container (an immutable snapshot of
// its properties and of the policies read from them) and a container's
// logical partitions with their item keys. They use only the leaves and
// the formats below them (record.go, partitionkey.go); what loads, looks
// up and changes them is in catalog.go, catalogcache.go and containers.go.

// Database is a database of the account. Its fields never change after
// creation; the containers map is guarded by the engine's catalog lock.
type Database struct {
	ID    string
	RID   string
	rid   []byte
	body  []byte
	etag  string
	colls map[string]*Container
}

// Container is an immutable snapshot of a container's properties; a replace
// swaps in a new snapshot with the same RID.
type Container struct {
	ID     string
	RID    string
	rid    []byte
	db     *Database
	pk     PartitionKeyDefinition
	pkSegs [][]string // partitionKeySegments, computed as it is loaded
	ttl    *int64     // defaultTtl: nil = off, -1 = on without default expiry, n > 0 seconds
	body   []byte
	etag   string
	offer  string // RID of its offer, "" when none
	index  *indexpolicy.Policy
	unique uniquepolicy.Policy
	record containerRecord
	// logRetention is how long all-versions-and-deletes records are kept
	// (changeFeedPolicy.retentionDuration); 0: none are logged.
	logRetention time.Duration
	// retired is set once a replace has put another Container in this one's
	// place: writers that looked this one up start over with the new one.
	retired atomic.Bool
	// indexRetired is set when the index no longer follows this Container's
	// indexing policy (a replace is rebuilding it for another): queries
	// then scan instead. Read after taking the query's snapshot.
	indexRetired atomic.Bool
	// presence caches the container's presence filter, which the engine
	// keeps by RID across replaces (see presenceFilters.of).
	presence atomic.Pointer[presence.Filter]
	// feedRead caches the container's change-feed read position, which the
	// engine keeps by RID across replaces (see Engine.feedPosition).
	feedRead atomic.Pointer[atomic.Uint64]
	// itemNames are property names of the items its writes parsed last
	// (see Container.keepItemNames), which a write's parse takes its
	// names' strings from.
	itemNames atomic.Pointer[jsondoc.Object]
	// computed are the container's computed properties (engine/computed.go).
	computed []*query.ComputedProperty
	// search are its vector and full-text policies (engine/searchpolicy.go).
	search *SearchPolicy
	// altLink is AltLink, made once.
	altLink string
	// queries are the queries on its items parsed so far (see
	// Container.cachedQuery): a replace that changes the computed
	// properties makes another Container, with none.
	queries queryCache
}

// queryCache keeps a container's parsed queries by their text: clients send
// the same parameterized text again and again, and a query.Query is
// immutable and safe for concurrent use. At most queryCacheEntries texts of
// at most queryCacheMaxText bytes are kept; a full cache starts over.
type queryCache struct {
	mu sync.RWMutex
	m  map[string]*query.Query
}

const (
	queryCacheEntries = 256
	queryCacheMaxText = 4 << 10
)

// containerRecord is what is stored for a container: its properties as the
// client gave them (defaults filled, system properties included).
type containerRecord struct {
	Props map[string]any `json:"props"`
	Offer string         `json:"offer,omitempty"`
	// Ranges are its partition key ranges; nil means one range, "0".
	Ranges *pkranges.Set `json:"ranges,omitempty"`
}

// Self is the container's RID-based link, with the trailing slash.
func (c *Container) Self() string { return "dbs/" + c.db.RID + "/colls/" + c.RID + "/" }

// AltLink is the container's name-based link.
func (c *Container) AltLink() string {
	if c.altLink != "" {
		return c.altLink
	}
	return "dbs/" + c.db.ID + "/colls/" + c.ID
}

// PartitionKeyDefinition returns the container's partition key definition.
func (c *Container) PartitionKeyDefinition() PartitionKeyDefinition { return c.pk }

// Database returns the database the container belongs to.
func (c *Container) Database() *Database { return c.db }

// Resource returns the container as the service returns it.
func (c *Container) Resource() *Resource {
	return &Resource{ID: c.ID, RID: c.RID, Body: c.body, ETag: c.etag}
}

// Resource returns the database as the service returns it.
func (d *Database) Resource() *Resource {
	return &Resource{ID: d.ID, RID: d.RID, Body: d.body, ETag: d.etag}
}

// expired reports whether the item's time to live has run out.
func (c *Container) expired(it *storedItem, now int64) bool {
	if c.ttl == nil {
		return false
	}
	ttl := int64(it.ttl)
	if ttl == 0 {
		ttl = *c.ttl
	}
	return ttl > 0 && it.ts+ttl <= now
}

// partition is one logical partition of a container.
type partition struct {
	c      *Container
	pk     PartitionKey
	enc    []byte
	prefix []byte
	// buf holds the prefix and the first item key built (itemKey, keyed
	// once it has), in the partition's own allocation, when they fit.
	keyed bool
	buf   [112]byte
}

func (c *Container) partition(pk PartitionKey) (*partition, *Error) {
	p := new(partition)
	if err := c.partitionInto(p, pk); err != nil {
		return nil, err
	}
	return p, nil
}

// partitionInto is partition into p.
func (c *Container) partitionInto(p *partition, pk PartitionKey) *Error {
	pk = c.legacyKey(pk)
	if len(pk) != len(c.pk.Paths) && !c.nonPartitioned() {
		return BadRequest("The partition key supplied has %d components, but the container's partition key definition has %d paths.", len(pk), len(c.pk.Paths))
	}
	*p = partition{c: c, pk: pk}
	prefix, enc := keys.AppendItemPartitionPrefix(p.buf[:0], c.rid, pk.AppendEPK, pk.AppendEncode)
	p.enc, p.prefix = enc, prefix[:len(prefix):len(prefix)]
	return nil
}

// Search returns the container's parsed search policies, or nil when it
// declares none (no embeddings, vector indexes, full-text paths or
// full-text indexes).
func (c *Container) Search() *SearchPolicy { return c.search }

// nonPartitioned reports whether c is a legacy non-partitioned container:
// created without a partition key by an API version before 2018-12-31, its
// definition is the service's system key /_partitionKey.
func (c *Container) nonPartitioned() bool {
	return c.pk.SystemKey != nil && *c.pk.SystemKey && len(c.pk.Paths) == 1 && c.pk.Paths[0] == "/_partitionKey"
}

// legacyKey maps the key that addresses a legacy non-partitioned
// container's one partition to the empty key its items are stored under:
// the JS SDK sends [] for it, the others [{}] (the undefined key), and an
// item without /_partitionKey extracts as undefined. Any other key is
// returned as given.
func (c *Container) legacyKey(pk PartitionKey) PartitionKey {
	if c.nonPartitioned() && pk.IsUndefined() {
		return PartitionKey{}
	}
	return pk
}

// scope is the key prefix of the items a feed or query reads: the logical
// partition (or hierarchical key prefix) when a partition key is given, else
// the whole container.
func (c *Container) scope(pk PartitionKey, hasPK bool) ([]byte, *Error) {
	if !hasPK {
		return keys.ItemContainerPrefix(c.rid), nil
	}
	return c.queryScope(pk)
}

func (p *partition) itemKey(id string) []byte {
	if n := len(p.prefix) + len(id); !p.keyed && n <= len(p.buf) && &p.buf[0] == &p.prefix[0] {
		// The prefix is at the start of buf: the key is written past it,
		// capped, and buf's room is used up.
		p.keyed = true
		return append(p.buf[:len(p.prefix)], id...)[:n:n]
	}
	return append(append(make([]byte, 0, len(p.prefix)+len(id)), p.prefix...), id...)
}

// queryScope returns the storage key prefix of the items a query scoped by
// the partition key pk reads. A full key scopes the query to one logical
// partition. On a hierarchical (MultiHash) container a shorter key, one value
// for each of the leading paths, scopes it to every logical partition under
// that prefix: the JavaScript SDK sends such a prefix in the partition key
// header of a query when the application passes a partial key. Because a
// MultiHash effective partition key is one hash per component, concatenated,
// a key prefix is a byte prefix of every item key beneath it.
func (c *Container) queryScope(pk PartitionKey) ([]byte, *Error) {
	if c.pk.Kind == "MultiHash" && len(pk) > 0 && len(pk) < len(c.pk.Paths) {
		return append(keys.ItemContainerPrefix(c.rid), effectivePartitionKey(&c.pk, pk)...), nil
	}
	p, err := c.partition(pk)
	if err != nil {
		return nil, err
	}
	return p.prefix, nil
}

// epkLen is the length of the effective partition key in the container's
// item keys.
func (c *Container) epkLen() int { return 16 * len(c.pk.Paths) }

// itemEPK returns the effective partition key part of one of the container's
// item keys.
func (c *Container) itemEPK(key []byte) []byte { return keys.ItemEPK(c.rid, c.epkLen(), key) }

// splitItemKey returns the id and the encoded partition key of one of the
// container's item keys.
func (c *Container) splitItemKey(key []byte) (id string, pkEnc []byte, ok bool) {
	return keys.SplitItemKey(c.rid, c.epkLen(), key)
}

// changeLogRetention is how long the container's all-versions-and-deletes
// records are kept: its changeFeedPolicy.retentionDuration (minutes). As in
// Cosmos, a container without one has no such feed, and none is logged.
func (c *Container) changeLogRetention() time.Duration { return c.logRetention }

// KeepsAllVersions reports whether the container keeps an all versions and
// deletes change feed (a changeFeedPolicy with a retention).
func (c *Container) KeepsAllVersions() bool { return c.logRetention > 0 }

// changeLogRetentionOf reads changeLogRetention from container properties.
func changeLogRetentionOf(props map[string]any) time.Duration {
	if p, ok := props["changeFeedPolicy"].(map[string]any); ok {
		if m, ok := p["retentionDuration"].(float64); ok && m > 0 {
			return time.Duration(m) * time.Minute
		}
	}
	return 0
}

// changeLogCutoff is the creation time (Unix seconds) before which the
// container's all-versions-and-deletes records are past their retention:
// all of them once the policy is removed.
func (c *Container) changeLogCutoff(now time.Time) int64 {
	if c.changeLogRetention() == 0 {
		return math.MaxInt64
	}
	return now.Add(-c.changeLogRetention()).Unix()
}

// expiredSpans are the key spans [lower, upper) of c's expiry index whose
// entries name the items expired at now (c.ttl set): those with a deadline
// at or before now, and, with a default time to live, those last modified
// at or before now less it.
func (c *Container) expiredSpans(now int64) [][2][]byte {
	span := func(kind byte, upto int64) [2][]byte {
		prefix := keys.ExpiryKindPrefix(c.rid, kind)
		return [2][]byte{prefix, binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(upto+1))}
	}
	spans := [][2][]byte{span(keys.ExpiryByDeadline, now)}
	if *c.ttl > 0 {
		spans = append(spans, span(keys.ExpiryByModified, now-*c.ttl))
	}
	return spans
}
