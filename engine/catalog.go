package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/presence"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

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
	ttl    *int64 // defaultTtl: nil = off, -1 = on without default expiry, n > 0 seconds
	body   []byte
	etag   string
	offer  string // RID of its offer, "" when none
	index  *indexPolicy
	unique uniqueKeyPolicy
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
	// keeps by RID across replaces (see presenceOf).
	presence atomic.Pointer[presence.Filter]
	// feedRead caches the container's change-feed read position, which the
	// engine keeps by RID across replaces (see Engine.feedPosition).
	feedRead atomic.Pointer[atomic.Uint64]
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
	Ranges *rangeSet `json:"ranges,omitempty"`
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

// loadCatalog reads every database and container at start-up.
func (e *Engine) loadCatalog(ctx context.Context) error {
	it, err := e.store.NewIterator(ctx, []byte{keys.Database}, []byte{keys.Database + 1}, false)
	if err != nil {
		return err
	}
	for it.Next() {
		var props map[string]any
		if err := json.Unmarshal(it.Value(), &props); err != nil {
			it.Close()
			return err
		}
		db, err := newDatabase(props)
		if err != nil {
			it.Close()
			return err
		}
		e.dbs[db.ID] = db
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, db := range e.dbs {
		p := keys.ContainerPrefix(db.rid)
		it, err := e.store.NewIterator(ctx, p, storage.PrefixEnd(p), false)
		if err != nil {
			return err
		}
		for it.Next() {
			var rec containerRecord
			if err := json.Unmarshal(it.Value(), &rec); err != nil {
				it.Close()
				return err
			}
			c, err := newContainer(db, rec)
			if err != nil {
				it.Close()
				return err
			}
			e.notePlacement(c)
			db.colls[c.ID] = c
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}

func newDatabase(props map[string]any) (*Database, error) {
	id, _ := stringProp(props, "id")
	ridStr, _ := stringProp(props, "_rid")
	rid, ok := rids.Decode(ridStr, 4)
	if !ok {
		return nil, errors.New("engine: database record with a bad _rid")
	}
	body, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	etag, _ := stringProp(props, "_etag")
	return &Database{ID: id, RID: ridStr, rid: rid, body: body, etag: etag, colls: map[string]*Container{}}, nil
}

func newContainer(db *Database, rec containerRecord) (*Container, error) {
	props := rec.Props
	id, _ := stringProp(props, "id")
	ridStr, _ := stringProp(props, "_rid")
	rid, ok := rids.Decode(ridStr, 8)
	if !ok {
		return nil, errors.New("engine: container record with a bad _rid")
	}
	var pk PartitionKeyDefinition
	raw, _ := json.Marshal(props["partitionKey"])
	if err := json.Unmarshal(raw, &pk); err != nil {
		return nil, err
	}
	c := &Container{ID: id, RID: ridStr, rid: rid, db: db, pk: pk, offer: rec.Offer, record: rec, index: newIndexPolicy(props),
		logRetention: changeLogRetentionOf(props)}
	c.etag, _ = stringProp(props, "_etag")
	if db != nil {
		// Every response about its items names it (X-Ms-Alt-Content-Path).
		c.altLink = "dbs/" + db.ID + "/colls/" + id
	}
	// Checked when the container was created; a record older than that
	// check keeps no policy it cannot hold.
	c.unique, _ = parseUniqueKeyPolicy(props["uniqueKeyPolicy"])
	c.computed, _ = parseComputedProperties(props, c.index)
	c.search, _ = parseSearchPolicy(props)
	if v, ok := props["defaultTtl"].(float64); ok {
		n := int64(v)
		c.ttl = &n
	}
	body, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	c.body = body
	return c, nil
}

// lookupDatabase finds a database by name or RID. The caller holds catMu.
func (e *Engine) lookupDatabase(name string) (*Database, *Error) {
	if db, ok := e.dbs[name]; ok {
		return db, nil
	}
	if _, ok := rids.Decode(name, 4); ok {
		for _, db := range e.dbs {
			if db.RID == name {
				return db, nil
			}
		}
	}
	return nil, &Error{Status: 404, Code: "NotFound", Message: "Database '" + name + "' does not exist. " + msgNotFound}
}

// lookupContainer finds a container by database and container name or RID.
// The caller holds catMu.
func (e *Engine) lookupContainer(dbName, name string) (*Container, *Error) {
	db, err := e.lookupDatabase(dbName)
	if err != nil {
		err.SubStatus = SubStatusOwnerResourceNotFound
		return nil, err
	}
	if c, ok := db.colls[name]; ok {
		return c, nil
	}
	if _, ok := rids.Decode(name, 8); ok {
		for _, c := range db.colls {
			if c.RID == name {
				return c, nil
			}
		}
	}
	return nil, &Error{Status: 404, Code: "NotFound", Message: "Container '" + name + "' does not exist in database '" + db.ID + "'. " + msgNotFound}
}

// Container returns the current snapshot of a container, by name or RID.
func (e *Engine) Container(ctx context.Context, db, name string) (*Container, error) {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	c, err := e.lookupContainer(db, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// successor is the catalog's current definition of retired container c,
// which a writer that found c retired writes by instead; 404 when c was
// deleted (a container made again under its name is another one).
func (e *Engine) successor(ctx context.Context, c *Container) (*Container, error) {
	next, err := e.Container(ctx, c.db.ID, c.ID)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(next.rid, c.rid) {
		return nil, NotFound("The container '%s' was deleted.", c.ID)
	}
	return next, nil
}

// CreateDatabase creates a database from its JSON body. throughput, when not
// nil, provisions an offer for it.
func (e *Engine) CreateDatabase(ctx context.Context, body []byte, throughput *Throughput) (*Resource, error) {
	props, id, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	if _, exists := e.dbs[id]; exists {
		return nil, Conflict("Database '%s' already exists. %s", id, msgConflict)
	}
	var rid []byte
	for {
		rid = rids.Random(nil, 4)
		if e.ridFree(rids.Encode(rid), 4) {
			break
		}
	}
	ridStr := rids.Encode(rid)
	lsn, err := e.seq.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer e.seq.finish(lsn)
	stripSystem(props)
	e.stamp(props, ridStr, "dbs/"+ridStr+"/", lsn, 0)
	props["_colls"] = "colls/"
	props["_users"] = "users/"
	stored, merr := json.Marshal(props)
	if merr != nil {
		return nil, merr
	}
	var generic map[string]any
	_ = json.Unmarshal(stored, &generic)
	db, nerr := newDatabase(generic)
	if nerr != nil {
		return nil, nerr
	}
	var offerRID string
	var offerBody []byte
	err = e.changeCatalog(ctx, func(b storage.Batch) (err error) {
		if err := b.Set(keys.DatabaseKey(id), stored); err != nil {
			return err
		}
		if throughput != nil {
			offerRID, offerBody, err = e.putOffer(ctx, b, throughput, ridStr, "dbs/"+ridStr+"/")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if offerRID != "" {
		e.offers[offerRID] = offerBody
	}
	e.dbs[id] = db
	return db.Resource(), nil
}

// ReadDatabase returns a database by name or RID.
func (e *Engine) ReadDatabase(ctx context.Context, name string) (*Resource, error) {
	return inDatabase(ctx, e, name, false, func(d *Database) (*Resource, error) { return d.Resource(), nil })
}

// ListDatabases returns every database, ordered by id.
func (e *Engine) ListDatabases(ctx context.Context) []*Resource {
	e.catMu.RLock(ctx)
	defer e.catMu.RUnlock()
	out := make([]*Resource, 0, len(e.dbs))
	for _, db := range e.dbs {
		out = append(out, db.Resource())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DeleteDatabase deletes a database and everything in it.
func (e *Engine) DeleteDatabase(ctx context.Context, name string, ifMatch string) error {
	if err := e.catMu.Lock(ctx); err != nil {
		return err
	}
	defer e.catMu.Unlock()
	db, err := e.lookupDatabase(name)
	if err != nil {
		return err
	}
	if err := matchCatalogETag(ifMatch, db.etag); err != nil {
		return err
	}
	off := e.databaseOffer(db)
	cerr := e.changeCatalog(ctx, func(b storage.Batch) error {
		if err := b.Delete(keys.DatabaseKey(db.ID)); err != nil {
			return err
		}
		for _, c := range db.colls {
			if err := e.deleteContainerRecords(ctx, b, c); err != nil {
				return err
			}
		}
		if err := e.deleteDatabasePrincipals(ctx, b, db); err != nil {
			return err
		}
		if err := deleteRange(ctx, e.store, b, keys.EncryptionKeyPrefix(db.rid), nil); err != nil {
			return err
		}
		if off != "" {
			return b.Delete(keys.OfferKey(off))
		}
		return nil
	})
	if cerr != nil {
		return cerr
	}
	delete(e.offers, off)
	for _, c := range db.colls {
		delete(e.offers, c.offer)
	}
	delete(e.dbs, db.ID)
	for _, c := range db.colls {
		c.retired.Store(true)
		e.purgeContainerData(c.rid)
	}
	return nil
}

// allContainers returns every container of every database as the catalog
// holds them now, for work that visits each (the TTL sweep, stats).
func (e *Engine) allContainers(ctx context.Context) []*Container {
	e.catMu.RLock(ctx)
	defer e.catMu.RUnlock()
	var colls []*Container
	for _, db := range e.dbs {
		for _, c := range db.colls {
			colls = append(colls, c)
		}
	}
	return colls
}

// ridFree reports whether no database or container has the RID. The caller holds catMu.
func (e *Engine) ridFree(rid string, n int) bool {
	for _, db := range e.dbs {
		if n == 4 && db.RID == rid {
			return false
		}
		for _, c := range db.colls {
			if n == 8 && c.RID == rid {
				return false
			}
		}
	}
	return true
}

func stripSystem(props map[string]any) {
	for k := range props {
		if systemProperties[k] {
			delete(props, k)
		}
	}
}

// decodeResource decodes the JSON body of a new database, container or
// script and checks its id.
func decodeResource(body []byte) (map[string]any, string, *Error) {
	props, err := decodeObject(body)
	if err != nil {
		return nil, "", err
	}
	id, ok := stringProp(props, "id")
	if !ok {
		return nil, "", BadRequest("The input content is invalid because the required property, id, is missing.")
	}
	if err := validResourceID(id); err != nil {
		return nil, "", err
	}
	return props, id, nil
}

// validResourceID checks the id of a database, container or script.
func validResourceID(id string) *Error {
	if err := validID(id); err != nil {
		return err
	}
	if len(id) > 255 {
		return BadRequest("The resource id exceeds the maximum length of 255 characters.")
	}
	if strings.HasSuffix(id, " ") {
		return BadRequest("The resource id must not end with a space.")
	}
	return nil
}

// matchCatalogETag is the If-Match rule of every catalog resource (a
// database, container, script, user, permission or offer): absent or "*"
// matches any version, else only the resource's current _etag does (412).
func matchCatalogETag(ifMatch string, etag any) error {
	if ifMatch == "" || ifMatch == "*" {
		return nil
	}
	if s, ok := etag.(string); ok && s == ifMatch {
		return nil
	}
	return PreconditionFailed(msgPrecondition)
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
}

func (c *Container) partition(pk PartitionKey) (*partition, *Error) {
	pk = c.legacyKey(pk)
	if len(pk) != len(c.pk.Paths) && !c.nonPartitioned() {
		return nil, BadRequest("The partition key supplied has %d components, but the container's partition key definition has %d paths.", len(pk), len(c.pk.Paths))
	}
	enc := pk.Encode()
	return &partition{c: c, pk: pk, enc: enc, prefix: keys.ItemPartitionPrefix(c.rid, effectivePartitionKey(&c.pk, pk), enc)}, nil
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
	return append(append(make([]byte, 0, len(p.prefix)+len(id)), p.prefix...), id...)
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
