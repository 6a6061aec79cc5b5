package engine

import (
	"encoding/json"
	"sort"

	"github.com/orrery-db/orrery/storage"
)

// Throughput is provisioned throughput as a client asks for it: manual RU/s
// or an autoscale maximum. Orrery stores it and answers with it; it never
// throttles.
type Throughput struct {
	Manual       int
	AutoscaleMax int
}

// offerRecord is a throughput offer as the service returns it.
type offerRecord map[string]any

// putOffer writes a new offer for a database or container into b.
// The caller holds catMu.
func (e *Engine) putOffer(b storage.Batch, t *Throughput, ownerRID, ownerSelf string) (string, []byte, error) {
	var rid string
	for rid == "" || e.offerRID(rid) != "" {
		rid = encodeRID(randomBytes(3))
	}
	content := map[string]any{"offerThroughput": t.Manual}
	if t.AutoscaleMax > 0 {
		content = map[string]any{
			"offerThroughput":        t.AutoscaleMax / 10,
			"offerAutopilotSettings": map[string]any{"maxThroughput": t.AutoscaleMax},
		}
	}
	lsn, err := e.seq.allocate()
	if err != nil {
		return "", nil, err
	}
	defer e.seq.finish(lsn)
	off := offerRecord{
		"id": rid, "_rid": rid, "_self": "offers/" + rid + "/",
		"resource": ownerSelf, "offerResourceId": ownerRID,
		"offerType": "Invalid", "offerVersion": "V2", "content": content,
		"_etag": formatETag(lsn, 0), "_ts": e.now().Unix(),
	}
	body, err := json.Marshal(off)
	if err != nil {
		return "", nil, err
	}
	if err := b.Set(offerKey(rid), body); err != nil {
		return "", nil, err
	}
	return rid, body, nil
}

func (e *Engine) loadOffers() error {
	it, err := e.store.NewIterator([]byte{prefixOffer}, []byte{prefixOffer + 1}, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		e.offers[string(it.Key()[1:])] = append([]byte(nil), it.Value()...)
	}
	return it.Err()
}

// databaseOffer returns the RID of a database's offer, "" when it has none.
// The caller holds catMu.
func (e *Engine) databaseOffer(db *Database) string {
	for rid, body := range e.offers {
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
func (e *Engine) ListOffers() []*Resource {
	e.catMu.RLock()
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
func (e *Engine) ReadOffer(rid string) (*Resource, error) {
	e.catMu.RLock()
	defer e.catMu.RUnlock()
	if r := e.offerRID(rid); r != "" {
		return offerResource(r, e.offers[r]), nil
	}
	return nil, NotFound("Offer '%s' does not exist. %s", rid, msgNotFound)
}

// ReplaceOffer replaces an offer's content (its throughput).
func (e *Engine) ReplaceOffer(rid string, body []byte) (*Resource, error) {
	props, perr := decodeObject(body)
	if perr != nil {
		return nil, perr
	}
	e.catMu.Lock()
	defer e.catMu.Unlock()
	key := e.offerRID(rid)
	if key == "" {
		return nil, NotFound("Offer '%s' does not exist. %s", rid, msgNotFound)
	}
	var cur offerRecord
	if err := json.Unmarshal(e.offers[key], &cur); err != nil {
		return nil, err
	}
	if ifm, _ := stringProp(props, "_etag"); ifm != "" && ifm != cur["_etag"] {
		return nil, PreconditionFailed(msgPrecondition)
	}
	content, ok := props["content"].(map[string]any)
	if !ok {
		return nil, BadRequest("The offer must have a content object.")
	}
	lsn, err := e.seq.allocate()
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
	b := e.catalogBatch()
	defer b.Close()
	if err := b.Set(offerKey(key), out); err != nil {
		return nil, err
	}
	if err := b.Commit(); err != nil {
		return nil, err
	}
	e.offers[key] = out
	return offerResource(key, out), nil
}

// offerRID finds the offer a link names: exactly, else ignoring case (clients
// sign offer links lower-cased, and offer RIDs are kept unique ignoring case).
// The caller holds catMu.
func (e *Engine) offerRID(rid string) string {
	if _, ok := e.offers[rid]; ok {
		return rid
	}
	for r := range e.offers {
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
