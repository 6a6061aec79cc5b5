package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sort"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/internal/uniquepolicy"
	"github.com/orrery-db/orrery/storage"
)

// CreateContainer creates a container in a database from its JSON body.
func (e *Engine) CreateContainer(ctx context.Context, dbName string, body []byte, throughput *Throughput) (*Resource, error) {
	props, id, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	normalized, perr := normalizeContainerProps(props, nil)
	if perr != nil {
		return nil, perr
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	db, derr := e.lookupDatabase(dbName)
	if derr != nil {
		return nil, derr
	}
	if _, exists := db.colls[id]; exists {
		return nil, Conflict("Container '%s' already exists. %s", id, msgConflict)
	}
	var rid []byte
	for rid == nil || !e.ridFree(rids.Encode(rid), 8) {
		rid = rids.Random(db.rid, 4)
	}
	ridStr := rids.Encode(rid)
	lsn, err := e.seq.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer e.seq.finish(lsn)
	e.stamp(normalized, ridStr, "dbs/"+db.RID+"/colls/"+ridStr+"/", lsn, 0)
	for _, k := range []string{"docs", "sprocs", "triggers", "udfs", "conflicts"} {
		normalized["_"+k] = k + "/"
	}
	rec := containerRecord{Props: normalized}
	if n := initialRangeCount(e.opts.PartitionKeyRanges, throughput); n > 1 && !propsHashV1(normalized) {
		rec.Ranges = pkranges.New(n, e.now().Unix())
	} else if n > 1 {
		rec.Ranges = newRangeSetV1(n, e.now().Unix())
	}
	e.seam.placeRanges(&rec, rid)
	var offerBody []byte
	// A container without throughput of its own gets the service's default
	// offer, unless it shares its database's.
	offered := throughput
	if offered == nil && e.databaseOffer(db) == "" {
		offered = &Throughput{Manual: DefaultThroughput}
	}
	var c *Container
	err = e.changeCatalog(ctx, func(b storage.Batch) (err error) {
		if offered != nil {
			if rec.Offer, offerBody, err = e.putOffer(ctx, b, offered, ridStr, normalized["_self"].(string)); err != nil {
				return err
			}
		}
		c, err = e.storeContainer(b, db, rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec.Offer != "" {
		e.offers[rec.Offer] = offerBody
	}
	db.colls[id] = c
	return c.Resource(), nil
}

// storeContainer writes a container record into b and returns its snapshot.
func (cat *catalog) storeContainer(b storage.Batch, db *Database, rec containerRecord) (*Container, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	// Round-trip so the snapshot sees the stored form exactly (numbers as float64).
	var stored containerRecord
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, err
	}
	c, err := newContainer(db, stored)
	if err != nil {
		return nil, err
	}
	cat.seam.notePlacement(c)
	if err := b.Set(keys.ContainerKey(db.rid, c.ID), raw); err != nil {
		return nil, err
	}
	return c, nil
}

// normalizeContainerProps validates a container body and fills the defaults
// the service fills. prev is the current container on a replace.
func normalizeContainerProps(props map[string]any, prev *Container) (map[string]any, *Error) {
	stripSystem(props)
	// Decode numbers into float64 from here on.
	raw, _ := json.Marshal(props)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)

	var pk PartitionKeyDefinition
	if v, ok := out["partitionKey"]; ok && v != nil {
		raw, _ := json.Marshal(v)
		if err := json.Unmarshal(raw, &pk); err != nil {
			return nil, BadRequest("The partitionKey property is invalid: %v", err)
		}
	} else if prev != nil {
		pk = prev.pk
	} else {
		return nil, BadRequest("The partitionKey property is required: give the container a partition key definition such as {\"paths\":[\"/pk\"]}.")
	}
	if err := pk.normalize(); err != nil {
		return nil, err
	}
	if prev != nil {
		// No version and version 1 are one definition.
		was, now := prev.pk, pk
		for _, d := range []*PartitionKeyDefinition{&was, &now} {
			if d.Version == 0 {
				d.Version = 1
			}
		}
		old, _ := json.Marshal(was)
		cur, _ := json.Marshal(now)
		if string(old) != string(cur) {
			return nil, BadRequest("The partition key of a container cannot be changed.")
		}
	}
	out["partitionKey"] = pk
	if err := normalizeEncryptionPolicy(out, pk, prev); err != nil {
		return nil, err
	}
	if v, ok := out["defaultTtl"]; ok {
		switch n := v.(type) {
		case nil:
			delete(out, "defaultTtl")
		case float64:
			if n != float64(int64(n)) || n == 0 || n < -1 || n > 2147483647 {
				return nil, BadRequest("The defaultTtl value %v is invalid: it must be -1 or a whole number of seconds from 1 to 2147483647.", v)
			}
		default:
			return nil, BadRequest("The defaultTtl value must be a number.")
		}
	}
	if err := validateIndexingPolicy(out["indexingPolicy"]); err != nil {
		return nil, err
	}
	if err := validateSpatialPolicy(out, prev); err != nil {
		return nil, err
	}
	if _, ok := out["indexingPolicy"].(map[string]any); !ok {
		out["indexingPolicy"] = map[string]any{
			"indexingMode":  "consistent",
			"automatic":     true,
			"includedPaths": []any{map[string]any{"path": "/*"}},
			"excludedPaths": []any{map[string]any{"path": "/\"_etag\"/?"}},
		}
	} else {
		ip := out["indexingPolicy"].(map[string]any)
		if _, ok := ip["indexingMode"]; !ok {
			ip["indexingMode"] = "consistent"
		}
		if _, ok := ip["automatic"]; !ok {
			ip["automatic"] = true
		}
		if _, ok := ip["includedPaths"]; !ok {
			ip["includedPaths"] = []any{map[string]any{"path": "/*"}}
		}
		if _, ok := ip["excludedPaths"]; !ok {
			ip["excludedPaths"] = []any{}
		}
		excludeETag(ip)
	}
	if _, err := parseComputedProperties(out, indexpolicy.New(out)); err != nil {
		return nil, err
	}
	var prevProps map[string]any
	var prevSearch *SearchPolicy
	if prev != nil {
		prevProps, prevSearch = prev.record.Props, prev.search
	}
	if err := checkSearchPolicy(out, prevProps, prevSearch); err != nil {
		return nil, err
	}
	if v, ok := out["uniqueKeyPolicy"]; !ok || v == nil {
		out["uniqueKeyPolicy"] = map[string]any{"uniqueKeys": []any{}}
		if prev != nil {
			out["uniqueKeyPolicy"] = prev.record.Props["uniqueKeyPolicy"]
		}
	}
	uk, uerr := uniquepolicy.Parse(out["uniqueKeyPolicy"])
	if uerr != nil {
		return nil, BadRequest("%s", uerr.Error())
	}
	if prev != nil {
		old, _ := json.Marshal(prev.unique)
		cur, _ := json.Marshal(uk)
		if string(old) != string(cur) {
			return nil, BadRequest("The unique key policy of a container cannot be changed after it is created: create a new container with the policy and copy the items.")
		}
	}
	if _, ok := out["conflictResolutionPolicy"]; !ok {
		out["conflictResolutionPolicy"] = map[string]any{
			"mode": "LastWriterWins", "conflictResolutionPath": "/_ts", "conflictResolutionProcedure": "",
		}
	}
	if _, ok := out["geospatialConfig"]; !ok {
		out["geospatialConfig"] = map[string]any{"type": "Geography"}
	}
	// Round-trip once more so the stored form holds only plain JSON values.
	raw, _ = json.Marshal(out)
	var final map[string]any
	_ = json.Unmarshal(raw, &final)
	return final, nil
}

// ReadContainer returns a container by database and name or RID.
func (e *Engine) ReadContainer(ctx context.Context, db, name string) (*Resource, error) {
	c, err := e.Container(ctx, db, name)
	if err != nil {
		return nil, err
	}
	return c.Resource(), nil
}

// ListContainers returns the containers of a database, ordered by id.
func (e *Engine) ListContainers(ctx context.Context, dbName string) ([]*Resource, error) {
	return inDatabase(ctx, &e.catalog, dbName, false, func(db *Database) ([]*Resource, error) {
		out := make([]*Resource, 0, len(db.colls))
		for _, c := range db.colls {
			out = append(out, c.Resource())
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	})
}

// ReplaceContainer replaces a container's properties. The partition key
// definition cannot change. A new indexing policy rebuilds the container's
// index before the replace returns; writes wait meanwhile, and queries scan.
func (e *Engine) ReplaceContainer(ctx context.Context, dbName, name string, body []byte, ifMatch string) (*Resource, error) {
	props, perr := decodeObject(body)
	if perr != nil {
		return nil, perr
	}
	r := containerReplace{catalog: &e.catalog, rebuilder: &e.rebuilder, search: &e.search, bgCtx: e.bgCtx}
	res, err := r.replace(ctx, dbName, name, props, ifMatch, false)
	if err == errReindexNeedsLocks {
		res, err = r.replace(ctx, dbName, name, props, ifMatch, true)
	}
	return res, err
}

// errReindexNeedsLocks tells ReplaceContainer to start again holding every
// partition lock, which a change of indexing policy needs.
var errReindexNeedsLocks = errors.New("engine: the replace changes the indexing policy")

// containerReplace replaces a container's definition: its catalog record,
// the search indexes its policy names, and the rebuilds of its index and
// item expiry that a new indexing policy or defaultTtl needs. It holds the
// parts it changes, not the engine.
type containerReplace struct {
	catalog   *catalog
	rebuilder *rebuilder
	search    *searchIndexes
	// bgCtx is the engine's background context: the rebuilds are the
	// engine's, not the request's.
	bgCtx context.Context
}

func (r containerReplace) replace(ctx context.Context, dbName, name string, props map[string]any, ifMatch string, locked bool) (*Resource, error) {
	if locked {
		// Partition locks before the catalog lock: writers take them in the
		// other order never (their catalog lookups come before).
		defer r.rebuilder.lockAllPartitions()()
	}
	if err := r.catalog.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer r.catalog.catMu.Unlock()
	prev, lerr := r.catalog.lookupContainer(dbName, name)
	if lerr != nil {
		return nil, lerr
	}
	if id, _ := stringProp(props, "id"); id != prev.ID {
		return nil, BadRequest("The id in the body (%q) must match the container's id (%q).", id, prev.ID)
	}
	if err := matchCatalogETag(ifMatch, prev.etag); err != nil {
		return nil, err
	}
	normalized, perr := normalizeContainerProps(maps.Clone(props), prev)
	if perr != nil {
		return nil, perr
	}
	reindex := !indexpolicy.New(normalized).Equal(prev.index) || computedChanged(normalized, prev)
	// A defaultTtl that changes what the expiry index keeps builds it again
	// (expiry.go), as a new indexing policy rebuilds the index.
	reexpire := expiryModeOf(defaultTTLOf(normalized)) != expiryModeOf(prev.ttl)
	if (reindex || reexpire) && !locked {
		return nil, errReindexNeedsLocks
	}
	lsn, err := r.catalog.lsns.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer r.catalog.lsns.finish(lsn)
	for _, k := range []string{"_rid", "_self", "_docs", "_sprocs", "_triggers", "_udfs", "_conflicts"} {
		normalized[k] = prev.record.Props[k]
	}
	normalized["_etag"] = formatETag(lsn, 0)
	normalized["_ts"] = r.catalog.now().Unix()
	var c *Container
	err = r.catalog.changeCatalog(ctx, func(b storage.Batch) (err error) {
		c, err = r.catalog.storeContainer(b, prev.db, containerRecord{Props: normalized, Offer: prev.offer, Ranges: prev.record.Ranges})
		if err != nil {
			return err
		}
		if err := r.search.policyReplaced(b, prev, c); err != nil {
			return err
		}
		if reexpire {
			if err := b.Set(keys.ExpiryRebuild(c.rid), nil); err != nil {
				return err
			}
		}
		if !reindex {
			return nil
		}
		return b.Set(keys.IndexRebuild(c.rid), nil)
	})
	if err != nil {
		return nil, err
	}
	if reindex {
		prev.indexRetired.Store(true)
		// The rebuild is the engine's: a client that goes away must not
		// leave the index half rebuilt until the next Open.
		if err = r.rebuilder.rebuildIndex(r.bgCtx, c); err != nil {
			// The mark stays: the next Open finishes the rebuild.
			c.indexRetired.Store(true)
		}
	}
	if reexpire {
		// Built by the engine as the index is: the mark stays when it
		// fails, and the next Open builds it.
		if xerr := r.rebuilder.rebuildExpiry(r.bgCtx, c); err == nil {
			err = xerr
		}
	}
	prev.db.colls[c.ID] = c
	prev.retired.Store(true)
	if err != nil {
		return nil, err
	}
	return c.Resource(), nil
}

// DeleteContainer deletes a container, its scripts and its items.
func (e *Engine) DeleteContainer(ctx context.Context, dbName, name string, ifMatch string) error {
	if err := e.catMu.Lock(ctx); err != nil {
		return err
	}
	defer e.catMu.Unlock()
	c, err := e.lookupContainer(dbName, name)
	if err != nil {
		return err
	}
	if err := matchCatalogETag(ifMatch, c.etag); err != nil {
		return err
	}
	if err := e.changeCatalog(ctx, func(b storage.Batch) error { return e.deleteContainerRecords(ctx, b, c) }); err != nil {
		return err
	}
	delete(e.offers, c.offer)
	delete(c.db.colls, c.ID)
	c.retired.Store(true)
	e.purger.purge(c.rid)
	return nil
}

// deleteContainerRecords deletes a container's catalog record, offer and
// scripts into b.
func (cat *catalog) deleteContainerRecords(ctx context.Context, b storage.Batch, c *Container) error {
	if err := b.Delete(keys.ContainerKey(c.db.rid, c.ID)); err != nil {
		return err
	}
	if c.offer != "" {
		if err := b.Delete(keys.OfferKey(c.offer)); err != nil {
			return err
		}
	}
	return deleteRange(ctx, cat.store, b, keys.ChildContainerPrefix(c.rid), nil)
}

// initialRangeCount is how many ranges a container created with t gets,
// at least atLeast (Options.PartitionKeyRanges).
func initialRangeCount(atLeast int, t *Throughput) int {
	n := max(atLeast, 1)
	switch {
	case t == nil:
	case t.Manual > RUPerPartitionKeyRange:
		n = max(n, (t.Manual+ruPerNewManualRange-1)/ruPerNewManualRange)
	default:
		ru := max(t.Manual, t.AutoscaleMax)
		n = max(n, (ru+RUPerPartitionKeyRange-1)/RUPerPartitionKeyRange)
	}
	return min(n, maxInitialRanges)
}
