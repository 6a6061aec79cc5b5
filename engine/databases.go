package engine

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// The databases of the account: create, read, list and delete (which
// sweeps its containers, users and offers). Loading the catalog and
// looking databases and containers up are in catalog.go.

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
	return inDatabase(ctx, &e.catalog, name, false, func(d *Database) (*Resource, error) { return d.Resource(), nil })
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
		e.purger.purge(c.rid)
	}
	return nil
}

// deleteDatabasePrincipals records the deletion of a database's users and
// permissions into b.
func (cat *catalog) deleteDatabasePrincipals(ctx context.Context, b storage.Batch, db *Database) error {
	for _, prefix := range []byte{keys.User, keys.Permission, keys.PrincipalRID} {
		if err := deleteRange(ctx, cat.store, b, []byte{prefix}, db.rid); err != nil {
			return err
		}
	}
	return nil
}
