package engine

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// Throughput is provisioned throughput as a client asks for it: manual RU/s
// or an autoscale maximum. Orrery stores it and answers with it; it never
// throttles.
type Throughput struct {
	Manual       int
	AutoscaleMax int
}

// DefaultThroughput is the manual throughput the service provisions for a
// container created without throughput in a database without shared
// throughput.
const DefaultThroughput = 400

// Throughput bounds, as the service enforces them on create and replace.
const (
	minManualThroughput     = 400
	manualThroughputStep    = 100
	minAutoscaleThroughput  = 1000
	autoscaleThroughputStep = 1000
	maxThroughput           = 1000000
)

// Validate checks throughput as the service does, answering its 400.
func (t *Throughput) Validate() error {
	if t.AutoscaleMax != 0 {
		if t.AutoscaleMax < minAutoscaleThroughput || t.AutoscaleMax > maxThroughput || t.AutoscaleMax%autoscaleThroughputStep != 0 {
			return BadRequest("The offer should have valid throughput values between %d and %d inclusive in increments of %d.", minAutoscaleThroughput, maxThroughput, autoscaleThroughputStep)
		}
		return nil
	}
	if t.Manual < minManualThroughput || t.Manual > maxThroughput || t.Manual%manualThroughputStep != 0 {
		return BadRequest("The offer should have valid throughput values between %d and %d inclusive in increments of %d.", minManualThroughput, maxThroughput, manualThroughputStep)
	}
	return nil
}

// MinThroughput is the least throughput an offer may be replaced with, as
// the x-ms-cosmos-min-throughput header reports it: of the autoscale
// maximum for an autoscale offer, else of manual RU/s.
func MinThroughput(offer *Resource) int {
	var o struct {
		Content struct {
			Autopilot any `json:"offerAutopilotSettings"`
		} `json:"content"`
	}
	if json.Unmarshal(offer.Body, &o) == nil && o.Content.Autopilot != nil {
		return minAutoscaleThroughput
	}
	return minManualThroughput
}

// offerContent is an offer's content object for t.
func offerContent(t *Throughput) map[string]any {
	if t.AutoscaleMax > 0 {
		return map[string]any{
			"offerThroughput":        t.AutoscaleMax / 10,
			"offerAutopilotSettings": map[string]any{"maxThroughput": t.AutoscaleMax},
		}
	}
	return map[string]any{"offerThroughput": t.Manual}
}

// throughputOf reads the throughput an offer content asks for: autoscale
// when it has autopilot settings, else manual.
func throughputOf(content map[string]any) (*Throughput, error) {
	if ap, ok := content["offerAutopilotSettings"]; ok && ap != nil {
		m, _ := ap.(map[string]any)
		n, ok := wholeNumber(m["maxThroughput"])
		if !ok {
			return nil, BadRequest("The offer's offerAutopilotSettings must have a whole maxThroughput.")
		}
		return &Throughput{AutoscaleMax: n}, nil
	}
	n, ok := wholeNumber(content["offerThroughput"])
	if !ok {
		return nil, BadRequest("The offer's content must have a whole offerThroughput or offerAutopilotSettings.")
	}
	return &Throughput{Manual: n}, nil
}

// offerRecord is a throughput offer as the service returns it.
type offerRecord map[string]any

// putOffer writes a new offer for a database or container into b.
// The caller holds catMu.
func (cat *catalog) putOffer(ctx context.Context, b storage.Batch, t *Throughput, ownerRID, ownerSelf string) (string, []byte, error) {
	var rid string
	for rid == "" || cat.offerRID(rid) != "" {
		rid = rids.Encode(rids.Random(nil, 3))
	}
	content := offerContent(t)
	lsn, err := cat.lsns.allocate(ctx)
	if err != nil {
		return "", nil, err
	}
	defer cat.lsns.finish(lsn)
	off := offerRecord{
		"id": rid, "_rid": rid, "_self": "offers/" + rid + "/",
		"resource": ownerSelf, "offerResourceId": ownerRID,
		"offerType": "Invalid", "offerVersion": "V2", "content": content,
		"_etag": formatETag(lsn, 0), "_ts": cat.now().Unix(),
	}
	body, err := json.Marshal(off)
	if err != nil {
		return "", nil, err
	}
	if err := b.Set(keys.OfferKey(rid), body); err != nil {
		return "", nil, err
	}
	return rid, body, nil
}

// databaseOffer returns the RID of a database's offer, "" when it has none.
// The caller holds catMu.
func (cat *catalog) databaseOffer(db *Database) string {
	for rid, body := range cat.offers {
		var o struct {
			OfferResourceID string `json:"offerResourceId"`
		}
		if json.Unmarshal(body, &o) == nil && o.OfferResourceID == db.RID {
			return rid
		}
	}
	return ""
}

// ListOffers returns every offer.
func (e *Engine) ListOffers(ctx context.Context) []*Resource {
	e.catMu.RLock(ctx)
	defer e.catMu.RUnlock()
	out := make([]*Resource, 0, len(e.offers))
	for rid, body := range e.offers {
		out = append(out, offerResource(rid, body))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func offerResource(rid string, body []byte) *Resource {
	var o struct {
		ETag string `json:"_etag"`
	}
	_ = json.Unmarshal(body, &o)
	return &Resource{ID: rid, RID: rid, Body: body, ETag: o.ETag}
}

// ReadOffer returns an offer by RID (case-insensitively, as clients sign it lower-cased).
func (e *Engine) ReadOffer(ctx context.Context, rid string) (*Resource, error) {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.RUnlock()
	if r := e.offerRID(rid); r != "" {
		return offerResource(r, e.offers[r]), nil
	}
	return nil, NotFound("Offer '%s' does not exist. %s", rid, msgNotFound)
}

// ReplaceOffer replaces an offer's content (its throughput). ifMatch, when
// not "" or "*", must be the offer's current ETag, as must the body's _etag
// when it has one.
func (e *Engine) ReplaceOffer(ctx context.Context, rid string, body []byte, ifMatch string) (*Resource, error) {
	props, perr := decodeObject(body)
	if perr != nil {
		return nil, perr
	}
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	key := e.offerRID(rid)
	if key == "" {
		return nil, NotFound("Offer '%s' does not exist. %s", rid, msgNotFound)
	}
	var cur offerRecord
	if err := json.Unmarshal(e.offers[key], &cur); err != nil {
		return nil, err
	}
	if err := matchCatalogETag(ifMatch, cur["_etag"]); err != nil {
		return nil, err
	}
	if ifm, _ := stringProp(props, "_etag"); ifm != "" && ifm != cur["_etag"] {
		return nil, PreconditionFailed(msgPrecondition)
	}
	content, ok := props["content"].(map[string]any)
	if !ok {
		return nil, BadRequest("The offer must have a content object.")
	}
	want, terr := throughputOf(content)
	if terr != nil {
		return nil, terr
	}
	curContent, _ := cur["content"].(map[string]any)
	if _, wasAuto := curContent["offerAutopilotSettings"]; wasAuto != (want.AutoscaleMax > 0) {
		if wasAuto {
			return nil, BadRequest("Updating offer to manually provisioned throughput is not allowed. Please invoke migration API to migrate this offer.")
		}
		return nil, BadRequest("Updating offer to autoscale provisioned throughput is not allowed. Please invoke migration API to migrate this offer.")
	}
	if err := want.Validate(); err != nil {
		return nil, err
	}
	content = offerContent(want)
	lsn, err := e.seq.allocate(ctx)
	if err != nil {
		return nil, err
	}
	defer e.seq.finish(lsn)
	cur["content"] = content
	cur["_etag"] = formatETag(lsn, 0)
	cur["_ts"] = e.now().Unix()
	out, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	if err := e.changeCatalog(ctx, func(b storage.Batch) error { return b.Set(keys.OfferKey(key), out) }); err != nil {
		return nil, err
	}
	e.offers[key] = out
	return offerResource(key, out), nil
}

// offerRID finds the offer a link names: exactly, else ignoring case (clients
// sign offer links lower-cased, and offer RIDs are kept unique ignoring case).
// The caller holds catMu.
func (cat *catalog) offerRID(rid string) string {
	if _, ok := cat.offers[rid]; ok {
		return rid
	}
	for r := range cat.offers {
		if equalFoldASCII(r, rid) {
			return r
		}
	}
	return ""
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ensureContainerOffers gives every container that has no offer of its own,
// in a database without shared throughput, the default offer the service
// provisions: stores written by builds before containers always had one
// lack it. Run once at Open, before the engine serves.
func (cat *catalog) ensureContainerOffers(ctx context.Context) error {
	if err := cat.catMu.Lock(ctx); err != nil {
		return err
	}
	defer cat.catMu.Unlock()
	for _, db := range cat.dbs {
		if cat.databaseOffer(db) != "" {
			continue
		}
		for _, c := range db.colls {
			if c.offer != "" {
				continue
			}
			if err := cat.giveDefaultOffer(ctx, db, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// giveDefaultOffer stores a default offer for c and records it in c's
// catalog record, in one batch. Only Open calls it, before the engine
// serves, so c is updated in place.
func (cat *catalog) giveDefaultOffer(ctx context.Context, db *Database, c *Container) error {
	var off string
	var body []byte
	err := cat.changeCatalog(ctx, func(b storage.Batch) (err error) {
		off, body, err = cat.putOffer(ctx, b, &Throughput{Manual: DefaultThroughput}, c.RID, "dbs/"+db.RID+"/colls/"+c.RID+"/")
		if err != nil {
			return err
		}
		rec := c.record
		rec.Offer = off
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Set(keys.ContainerKey(db.rid, c.ID), raw)
	})
	if err != nil {
		return err
	}
	cat.offers[off] = body
	c.offer, c.record.Offer = off, off
	return nil
}
