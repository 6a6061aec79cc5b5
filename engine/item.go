package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// The public entry points of item operations. A write reads top to bottom
// through four files: an entry point here hands the request to itemOperation
// (operation.go), which validates the body (parseItem, below) and runs the
// operation as one transaction on its logical partition (inPartition, then
// put or remove, txn.go), which writes the stored record (storedItem,
// record.go). A point read reads the record outside any transaction
// (pointRead, txn.go).

// MaxItemBytes is the largest item, system properties included.
const MaxItemBytes = 2 * 1024 * 1024

// ItemRequest addresses an item operation.
type ItemRequest struct {
	Database  string
	Container string
	// ID is the item id of point operations on an existing item.
	ID string
	// PartitionKey is the x-ms-documentdb-partitionkey value; HasPartitionKey
	// is false when the request had none.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// Body is the item (create, upsert, replace).
	Body []byte
	// IfMatch makes a write conditional on the item's current ETag ("*": any).
	IfMatch string
	// IfNoneMatch on a read answers 304 when the ETag still matches.
	IfNoneMatch string
	// PreTriggers and PostTriggers name the triggers the write runs.
	PreTriggers  []string
	PostTriggers []string
}

// ItemResult is the outcome of an item operation.
type ItemResult struct {
	// Status is 200, 201, 204 or 304.
	Status int
	// Body is the item with its system properties (nil for deletes and 304).
	Body []byte
	ETag string
	// Charge is the request charge in request units.
	Charge float64
	// SessionLSN is the LSN of the session token, when the operation read
	// it from the store with its own work (a shared store); 0 otherwise,
	// and the caller asks SessionLSN.
	SessionLSN uint64
}

var errPartitionKeyRequired = BadRequest("PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header.")

// CreateItem creates an item; 409 when its id exists in the logical partition.
func (e *Engine) CreateItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.itemOperation(ctx, BatchCreate, req)
}

// UpsertItem creates the item or replaces it (honouring If-Match when given).
func (e *Engine) UpsertItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.itemOperation(ctx, BatchUpsert, req)
}

// ReplaceItem replaces an existing item; 404 when absent, 412 on a stale If-Match.
func (e *Engine) ReplaceItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.itemOperation(ctx, BatchReplace, req)
}

// DeleteItem deletes an item; 404 when absent, 412 on a stale If-Match.
func (e *Engine) DeleteItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.itemOperation(ctx, BatchDelete, req)
}

// ReadItem reads an item by id and partition key.
func (e *Engine) ReadItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.seam.readItem(ctx, req)
}

// readItemLocal is ReadItem on a store of this process alone.
func (e *Engine) readItemLocal(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	c, err := e.Container(ctx, req.Database, req.Container)
	if err != nil {
		return nil, err
	}
	if !req.HasPartitionKey {
		return nil, errPartitionKeyRequired
	}
	p, perr := c.partition(req.PartitionKey)
	if perr != nil {
		return nil, perr
	}
	if verr := validItemID(req.ID); verr != nil {
		return nil, verr
	}
	it, err := e.pointRead(ctx, c, p.itemKey(req.ID))
	if err != nil {
		return nil, err
	}
	return readResult(it, req.IfNoneMatch, 0), nil
}

// readResult answers a point read of it: 304 when ifNoneMatch matches its
// ETag, else the item; session is the session LSN the read brought.
func readResult(it *storedItem, ifNoneMatch string, session uint64) *ItemResult {
	etag := it.etag()
	if ifNoneMatch != "" && (ifNoneMatch == "*" || ifNoneMatch == etag) {
		return &ItemResult{Status: 304, ETag: etag, Charge: 1, SessionLSN: session}
	}
	return &ItemResult{Status: 200, Body: it.doc, ETag: etag, Charge: readCharge(len(it.doc)), SessionLSN: session}
}

// ItemByRID resolves the RID of one of the container's items (its _rid, the
// last segment of its _self link) to the item's id and partition key, so
// that a request addressed by RID can be served like one addressed by name.
// An unknown or malformed RID is 404, as a missing id is.
func (e *Engine) ItemByRID(ctx context.Context, c *Container, rid string) (id string, pk PartitionKey, err error) {
	b, ok := rids.Decode(rid, 16)
	if !ok || !bytes.Equal(b[:8], c.rid) {
		return "", PartitionKey{}, NotFound(msgNotFound)
	}
	key, err := e.store.Get(ctx, keys.RIDKey(c.rid, b[8:]))
	if errors.Is(err, storage.ErrNotFound) {
		return "", PartitionKey{}, NotFound(msgNotFound)
	}
	if err != nil {
		return "", PartitionKey{}, err
	}
	id, pkEnc, ok := c.splitItemKey(key)
	if !ok {
		return "", PartitionKey{}, errors.New("engine: corrupt RID index entry")
	}
	pk, perr := ParsePartitionKeyHeader(string(pkEnc))
	if perr != nil {
		return "", PartitionKey{}, perr
	}
	return id, pk, nil
}

// item is a validated incoming item body.
type item struct {
	obj object
	id  string
	pk  PartitionKey
	ttl int32
}

// parseItem validates a create/upsert/replace body against the container and
// the request's partition key.
func (c *Container) parseItem(body []byte, req *ItemRequest) (*item, error) {
	if len(body) > MaxItemBytes {
		return nil, TooLarge("%s: the item is %d bytes, the limit is %d.", msgEntityTooLarge, len(body), MaxItemBytes)
	}
	// One scan: json.Valid's answer and checkPayload's.
	valid, perr := validPayload(body)
	if len(body) == 0 || !valid {
		return nil, BadRequest("The request body is not valid JSON.")
	}
	if !utf8.Valid(body) {
		// json.Valid passes invalid UTF-8 inside strings; stored, it would
		// break every SDK's read and query of the partition. The server
		// refuses such bodies first; this covers seeds, imports and scripts.
		return nil, BadRequest("The request payload is invalid: it is not valid UTF-8. Ensure to provide a valid request payload.")
	}
	if perr != nil {
		return nil, perr
	}
	obj, err := parseObject(body)
	if err != nil {
		return nil, BadRequest("The request body must be a JSON object.")
	}
	it := &item{obj: obj.withoutSystem()}
	rawID, ok := obj.get("id")
	if !ok {
		return nil, BadRequest("The input content is invalid because the required property, id, is missing.")
	}
	if id, ok := plainString(rawID); ok {
		it.id = id
	} else if json.Unmarshal(rawID, &it.id) != nil {
		return nil, BadRequest("The id property must be a string.")
	}
	if e := validItemID(it.id); e != nil {
		return nil, e
	}
	if raw, ok := obj.get("ttl"); ok {
		// null is no number of seconds: the service refuses it as it
		// refuses 0 and -10.
		n, perr := strconv.ParseFloat(string(raw), 64)
		if perr != nil || n != math.Trunc(n) || n == 0 || n < -1 || n > math.MaxInt32 {
			return nil, BadRequest("The ttl value %s is invalid: it must be -1 or a whole number of seconds from 1 to 2147483647.", raw)
		}
		it.ttl = int32(n)
	}
	doc := map[string]any{}
	for _, path := range c.pk.Paths {
		name := firstSegment(path)
		if raw, ok := obj.get(name); ok {
			if s, ok := plainString(raw); ok {
				doc[name] = s
				continue
			}
			var v any
			if json.Unmarshal(raw, &v) == nil {
				doc[name] = v
			}
		}
	}
	pk, perr := extractPartitionKey(&c.pk, doc)
	if perr != nil {
		return nil, perr
	}
	pk = c.legacyKey(pk)
	it.pk = pk
	if req.HasPartitionKey && !c.legacyKey(req.PartitionKey).Equal(pk) {
		return nil, &Error{Status: 400, SubStatus: SubStatusPartitionKeyMismatch, Code: "BadRequest",
			Message: "PartitionKey extracted from document doesn't match the one specified in the header. Header: " +
				req.PartitionKey.String() + ", document: " + pk.String() + "."}
	}
	return it, nil
}

// plainString returns the value of a JSON string without escapes, which is
// its bytes between the quotes; ok is false for anything else. raw must be
// valid JSON.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

func firstSegment(path string) string {
	s := path[1:]
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			s = s[:i]
			break
		}
	}
	return s
}

// checkIfMatch applies an If-Match precondition to the current item.
func checkIfMatch(ifMatch string, cur *storedItem) error {
	if ifMatch == "" {
		return nil
	}
	if cur == nil {
		return PreconditionFailed(msgPrecondition)
	}
	if ifMatch != "*" && ifMatch != cur.etag() {
		return PreconditionFailed(msgETagMismatch)
	}
	return nil
}

// writeCharge approximates the request units of a write of n bytes.
func writeCharge(n int) float64 { return 5.71 + float64(n/1024)*0.38 }

// readCharge approximates the request units of a point read of n bytes.
func readCharge(n int) float64 { return 1 + float64(n/1024)*0.1 }
