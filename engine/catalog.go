package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/internal/uniquepolicy"
	"github.com/orrery-db/orrery/storage"
)

// catalog is the catalog cache: the databases with their containers, and
// the offers, as loaded from the store, under their lock. It holds no
// *Engine: what differs on a shared store comes through the seam's
// catalogLocker (in catMu) and catalogSeam. The generic create, replace
// and delete of catalog resources with their one If-Match rule are its
// too (children.go).
type catalog struct {
	store storage.Store
	seam  catalogSeam
	// lsns numbers catalog changes (their ETags and RIDs); now stamps them.
	lsns   lsnSource
	now    func() time.Time
	catMu  catalogMutex
	dbs    map[string]*Database
	offers map[string][]byte
}

// catalogSeam is the seam's part in catalog changes: a batch of them
// (which on a shared store bumps the catalog version), and where a
// container's ranges live, for a store of several places.
type catalogSeam interface {
	catalogBatch() (storage.Batch, error)
	notePlacement(c *Container)
}

// catalogBatch starts a batch of catalog changes. On a shared store it
// bumps the catalog version in the same batch. The caller holds catMu for
// writing.
func (cat *catalog) catalogBatch() (storage.Batch, error) { return cat.seam.catalogBatch() }

// loadCatalog reads every database and container at start-up.
func (cat *catalog) loadCatalog(ctx context.Context) error {
	it, err := cat.store.NewIterator(ctx, []byte{keys.Database}, []byte{keys.Database + 1}, false)
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
		cat.dbs[db.ID] = db
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, db := range cat.dbs {
		p := keys.ContainerPrefix(db.rid)
		it, err := cat.store.NewIterator(ctx, p, storage.PrefixEnd(p), false)
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
			cat.seam.notePlacement(c)
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
	c := &Container{ID: id, RID: ridStr, rid: rid, db: db, pk: pk, offer: rec.Offer, record: rec, index: indexpolicy.New(props),
		logRetention: changeLogRetentionOf(props)}
	c.pkSegs = pathSegments(pk.Paths)
	c.etag, _ = stringProp(props, "_etag")
	if db != nil {
		// Every response about its items names it (X-Ms-Alt-Content-Path).
		c.altLink = "dbs/" + db.ID + "/colls/" + id
	}
	// Checked when the container was created; a record older than that
	// check keeps no policy it cannot hold.
	c.unique, _ = uniquepolicy.Parse(props["uniqueKeyPolicy"])
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
func (cat *catalog) lookupDatabase(name string) (*Database, *Error) {
	if db, ok := cat.dbs[name]; ok {
		return db, nil
	}
	if _, ok := rids.Decode(name, 4); ok {
		for _, db := range cat.dbs {
			if db.RID == name {
				return db, nil
			}
		}
	}
	return nil, &Error{Status: 404, Code: "NotFound", Message: "Database '" + name + "' does not exist. " + msgNotFound}
}

// lookupContainer finds a container by database and container name or RID.
// The caller holds catMu.
func (cat *catalog) lookupContainer(dbName, name string) (*Container, *Error) {
	db, err := cat.lookupDatabase(dbName)
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
func (cat *catalog) Container(ctx context.Context, db, name string) (*Container, error) {
	if err := cat.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer cat.catMu.RUnlock()
	c, err := cat.lookupContainer(db, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// successor is the catalog's current definition of retired container c,
// which a writer that found c retired writes by instead; 404 when c was
// deleted (a container made again under its name is another one).
func (cat *catalog) successor(ctx context.Context, c *Container) (*Container, error) {
	next, err := cat.Container(ctx, c.db.ID, c.ID)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(next.rid, c.rid) {
		return nil, NotFound("The container '%s' was deleted.", c.ID)
	}
	return next, nil
}

// onCurrent calls try with the partition pk of c and, while try reports
// that it did not run because c was retired (a replace of the container
// came first, here or on another gateway), with the partition of c's
// successor: a write goes by its container's current rules. The
// partition is built in room when it is not nil (each try's anew).
func (cat *catalog) onCurrent(ctx context.Context, c *Container, pk PartitionKey, room *partition, try func(c *Container, p *partition) (ran bool, err error)) error {
	for {
		p := room
		if p == nil {
			p = new(partition)
		}
		if perr := c.partitionInto(p, pk); perr != nil {
			return perr
		}
		if ran, err := try(c, p); ran {
			return err
		}
		next, err := cat.successor(ctx, c)
		if err != nil {
			return err
		}
		c = next
	}
}

// allContainers returns every container of every database as the catalog
// holds them now, for work that visits each (the TTL sweep, stats).
func (cat *catalog) allContainers(ctx context.Context) []*Container {
	cat.catMu.RLock(ctx)
	defer cat.catMu.RUnlock()
	var colls []*Container
	for _, db := range cat.dbs {
		for _, c := range db.colls {
			colls = append(colls, c)
		}
	}
	return colls
}

// ridFree reports whether no database or container has the RID. The caller holds catMu.
func (cat *catalog) ridFree(rid string, n int) bool {
	for _, db := range cat.dbs {
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
		if jsondoc.IsSystem(k) {
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
func (cat *catalog) loadOffers(ctx context.Context) error {
	it, err := cat.store.NewIterator(ctx, []byte{keys.Offer}, []byte{keys.Offer + 1}, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		cat.offers[string(it.Key()[1:])] = append([]byte(nil), it.Value()...)
	}
	return it.Err()
}
