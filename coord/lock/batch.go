package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
)

// FencedBatch is a transactional batch of writes to protected items of one
// logical partition, all under one fence: it commits only if none of the
// items it writes has accepted a newer token of the fence's lock name, and
// records the fence's token in every item it writes. Build it with the
// methods below, in order, and run it with Execute.
//
// Execute reads the items that the replaces, upserts, patches and deletes
// name (concurrently), checks their fences, and sends one transactional
// batch whose writes are conditional on the ETags it read and carry the
// merged FencesField: two round trips. An item that changed between the
// read and the batch makes the batch fail as a whole; Execute then reads
// again. Creates need no read: an existing item makes the batch fail (409),
// reported as ErrFenced when that item carries a newer token.
type FencedBatch struct {
	c   *azcosmos.ContainerClient
	pk  azcosmos.PartitionKey
	f   Fence
	ops []fencedOp
}

type opKind int

const (
	opCreate opKind = iota
	opReplace
	opUpsert
	opPatch
	opDelete
	opRead
)

type fencedOp struct {
	kind  opKind
	id    string
	body  []byte
	patch azcosmos.PatchOperations
	err   error // a body that is not an object with an id
}

// NewFencedBatch returns an empty fenced batch for the logical partition pk
// of c, under fence f.
func NewFencedBatch(c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, f Fence) *FencedBatch {
	return &FencedBatch{c: c, pk: pk, f: f}
}

func bodyID(item []byte) (string, error) {
	var doc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(item, &doc); err != nil || doc.ID == "" {
		return "", errors.New(`lock: a fenced write needs a JSON object with a string "id"`)
	}
	return doc.ID, nil
}

// CreateItem adds the creation of item, with the fence recorded.
func (b *FencedBatch) CreateItem(item []byte) {
	id, err := bodyID(item)
	b.ops = append(b.ops, fencedOp{kind: opCreate, id: id, body: item, err: err})
}

// ReplaceItem adds the replacement of item id by item, if the item has
// accepted no newer token.
func (b *FencedBatch) ReplaceItem(id string, item []byte) {
	bid, err := bodyID(item)
	if err == nil && bid != id {
		err = fmt.Errorf("lock: replacing item %q with a body whose id is %q", id, bid)
	}
	b.ops = append(b.ops, fencedOp{kind: opReplace, id: id, body: item, err: err})
}

// UpsertItem adds the creation of item, or its replacement if it exists and
// has accepted no newer token.
func (b *FencedBatch) UpsertItem(item []byte) {
	id, err := bodyID(item)
	b.ops = append(b.ops, fencedOp{kind: opUpsert, id: id, body: item, err: err})
}

// PatchItem adds a patch of item id, if it has accepted no newer token. It
// is also conditional on the ETag Execute read; a condition set on ops
// still applies, and a false one fails the batch (412).
func (b *FencedBatch) PatchItem(id string, ops azcosmos.PatchOperations) {
	b.ops = append(b.ops, fencedOp{kind: opPatch, id: id, patch: ops})
}

// DeleteItem adds the deletion of item id, if it has accepted no newer
// token.
func (b *FencedBatch) DeleteItem(id string) {
	b.ops = append(b.ops, fencedOp{kind: opDelete, id: id})
}

// ReadItem adds a read of item id; its result is in the response.
func (b *FencedBatch) ReadItem(id string) {
	b.ops = append(b.ops, fencedOp{kind: opRead, id: id})
}

// current is an item as Execute read it: nil value when absent.
type current struct {
	value []byte
	etag  azcore.ETag
}

// Execute runs the batch. It returns the response and nil when the batch
// committed; ErrFenced (wrapped, naming the item) when an item it writes
// has accepted a newer token, with nothing written; a *coord.BatchError
// naming the operation (by its position in the order the methods were
// called) when the database refused the batch for another reason, with
// nothing written; or the request's error. o is passed to
// ExecuteTransactionalBatch (nil for the defaults).
func (b *FencedBatch) Execute(ctx context.Context, o *azcosmos.TransactionalBatchOptions) (azcosmos.TransactionalBatchResponse, error) {
	if err := b.f.check(); err != nil {
		return azcosmos.TransactionalBatchResponse{}, err
	}
	for i, op := range b.ops {
		if op.err != nil {
			return azcosmos.TransactionalBatchResponse{}, fmt.Errorf("lock: operation %d: %w", i, op.err)
		}
	}
	for range maxFenceAttempts {
		cur, err := b.read(ctx)
		if err != nil {
			return azcosmos.TransactionalBatchResponse{}, err
		}
		batch, conditional, err := b.build(cur)
		if err != nil {
			return azcosmos.TransactionalBatchResponse{}, err
		}
		resp, err := b.c.ExecuteTransactionalBatch(ctx, batch, o)
		if err != nil || resp.Success {
			return resp, err
		}
		be := coord.NewBatchError(resp)
		if be.Index >= 0 && conditional[be.Index] &&
			(be.StatusCode == http.StatusPreconditionFailed || be.StatusCode == http.StatusConflict) &&
			b.changed(ctx, b.ops[be.Index].id, cur) {
			continue // the item changed since our read: read again
		}
		if be.Index >= 0 && b.ops[be.Index].kind == opCreate && be.StatusCode == http.StatusConflict {
			id := b.ops[be.Index].id
			if r, rerr := b.c.ReadItem(ctx, b.pk, id, nil); rerr == nil {
				if s, serr := storedFences(r.Value, b.f.Name); serr == nil && s.token > b.f.Token {
					return resp, b.f.fenced(id, s.token)
				}
			}
		}
		return resp, be
	}
	return azcosmos.TransactionalBatchResponse{}, fmt.Errorf("lock: fenced batch: its items kept changing under %d attempts", maxFenceAttempts)
}

// changed reports whether item id is no longer as read: then a refusal of
// an operation conditional on the read is a race to retry, not the
// operation's own failure (such as a patch condition that is false).
func (b *FencedBatch) changed(ctx context.Context, id string, cur map[string]current) bool {
	was := cur[id]
	r, err := b.c.ReadItem(ctx, b.pk, id, nil)
	switch {
	case statusOf(err) == http.StatusNotFound:
		return was.value != nil
	case err != nil:
		return true // unknown: reading again tells
	}
	return was.value == nil || r.ETag != was.etag
}

// read reads every item an operation needs the current version of.
func (b *FencedBatch) read(ctx context.Context) (map[string]current, error) {
	var ids []string
	seen := map[string]bool{}
	for _, op := range b.ops {
		switch op.kind {
		case opReplace, opUpsert, opPatch, opDelete:
			if !seen[op.id] {
				seen[op.id] = true
				ids = append(ids, op.id)
			}
		}
	}
	out := make(map[string]current, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var first error
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := b.c.ReadItem(ctx, b.pk, id, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				out[id] = current{value: r.Value, etag: r.ETag}
			case statusOf(err) == http.StatusNotFound:
				out[id] = current{}
			case first == nil:
				first = err
			}
		}()
	}
	wg.Wait()
	return out, first
}

// build makes the transactional batch from what was read; conditional
// marks the operations that are conditional on what was read.
func (b *FencedBatch) build(cur map[string]current) (azcosmos.TransactionalBatch, []bool, error) {
	batch := b.c.NewTransactionalBatch(b.pk)
	conditional := make([]bool, len(b.ops))
	for i, op := range b.ops {
		var s stored
		var etag *azcore.ETag
		if c, ok := cur[op.id]; ok && c.value != nil {
			var err error
			if s, err = storedFences(c.value, b.f.Name); err != nil {
				return batch, nil, err
			}
			if s.token > b.f.Token {
				return batch, nil, b.f.fenced(op.id, s.token)
			}
			e := c.etag
			etag = &e
			conditional[i] = true
		}
		opts := &azcosmos.TransactionalBatchItemOptions{IfMatchETag: etag}
		switch op.kind {
		case opCreate:
			given, err := storedFences(op.body, b.f.Name)
			if err != nil {
				return batch, nil, err
			}
			body, _, err := withFence(op.body, given, b.f)
			if err != nil {
				return batch, nil, err
			}
			batch.CreateItem(body, nil)
		case opReplace, opUpsert:
			body, _, err := withFence(op.body, s, b.f)
			if err != nil {
				return batch, nil, err
			}
			switch {
			case op.kind == opUpsert && etag == nil:
				// Absent when read: create-only, so an item created
				// meanwhile fails the batch and is read again.
				batch.CreateItem(body, nil)
				conditional[i] = true
			case etag == nil:
				batch.ReplaceItem(op.id, body, nil) // absent: the batch fails with 404
			default:
				batch.ReplaceItem(op.id, body, opts)
			}
		case opPatch:
			p := op.patch
			if s.fences == nil {
				p.AppendSet("/"+FencesField, map[string]int64{b.f.Name: b.f.Token})
			} else {
				p.AppendSet(fencePath(b.f.Name), b.f.Token)
			}
			batch.PatchItem(op.id, p, opts)
		case opDelete:
			batch.DeleteItem(op.id, opts)
		case opRead:
			batch.ReadItem(op.id, nil)
		}
	}
	return batch, conditional, nil
}
