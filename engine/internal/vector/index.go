package vector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Index is one vector index: the vectors of one embedding path of a
// container (or of one physical partition of it), searchable by similarity.
// Searches run concurrently; a Pending change excludes them until it is
// committed or aborted.
type Index struct {
	mu  sync.RWMutex
	cfg Config
	m   meta
	dim int

	keys [][]byte          // node id -> item key; nil for a free id
	ids  map[string]uint32 // item key -> node id
	free []uint32          // free ids below m.nextID, reused first
	live int

	// vecs holds every node's vector as searched (unit length for cosine),
	// node i at [i*dim, (i+1)*dim): flat and diskANN.
	vecs []float32

	// diskANN: out-neighbours, and the epoch in which a node was deleted
	// (it stays linked, for navigation, until consolidation frees it).
	nbrs [][]uint32
	dead map[uint32]uint32

	// quantizedFlat: the quantizer once trained, and every node's code.
	pq    *quantizer
	codes []byte

	scratch sync.Pool
}

// TrainAt is the number of vectors at which a quantizedFlat index trains its
// product quantizer; below it, it searches the stored vectors exactly.
var TrainAt = 4096

// Open loads the index kept in r, or starts an empty one with cfg when r holds
// none. An index whose keyspace was written with another configuration is an
// error wrapping ErrCorrupt: a policy change rebuilds the index from the
// items into a fresh keyspace.
func Open(ctx context.Context, r Reader, cfg Config) (*Index, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ix := &Index{cfg: cfg, dim: cfg.Dimensions, ids: map[string]uint32{}, dead: map[uint32]uint32{}}
	ix.m.cfg = cfg
	raw, err := r.Get(ctx, []byte{recMeta})
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return ix, nil
	}
	m, err := decodeMeta(raw)
	if err != nil {
		return nil, err
	}
	if m.cfg != cfg {
		return nil, fmt.Errorf("%w: the keyspace holds a %v index of %d dimensions, not the one configured", ErrCorrupt, m.cfg.Kind, m.cfg.Dimensions)
	}
	ix.m = m
	n := int(m.nextID)
	ix.keys = make([][]byte, n)
	if cfg.Kind == QuantizedFlat {
		cb, err := r.Get(ctx, []byte{recCodebook})
		if err != nil {
			return nil, err
		}
		if cb != nil {
			if ix.pq, err = decodeQuantizer(cb); err != nil {
				return nil, err
			}
		}
	}
	if ix.holdsVectors() {
		ix.vecs = make([]float32, n*ix.dim)
	}
	if cfg.Kind == DiskANN {
		ix.nbrs = make([][]uint32, n)
	}
	buf := make([]float32, ix.dim)
	err = r.Scan(ctx, []byte{recNode}, []byte{recNode + 1}, func(k, v []byte) error {
		id, err := nodeID(k, n)
		if err != nil {
			return err
		}
		var dst []float32
		if ix.holdsVectors() {
			dst = buf
		}
		key, err := decodeNode(cfg.DataType, ix.dim, v, dst)
		if err != nil {
			return err
		}
		ix.keys[id] = bytes.Clone(key)
		if dst != nil {
			ix.setVec(id, dst)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cfg.Kind == DiskANN {
		err = r.Scan(ctx, []byte{recEdges}, []byte{recEdges + 1}, func(k, v []byte) error {
			id, err := nodeID(k, n)
			if err != nil {
				return err
			}
			ix.nbrs[id], err = decodeEdges(v)
			return err
		})
		if err != nil {
			return nil, err
		}
		err = r.Scan(ctx, []byte{recDead}, []byte{recDead + 1}, func(k, v []byte) error {
			id, err := nodeID(k, n)
			if err != nil {
				return err
			}
			rd := reader{b: v}
			ix.dead[id] = uint32(rd.uvarint())
			if rd.err {
				return fmt.Errorf("%w: dead record", ErrCorrupt)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if ix.pq != nil {
		{
			ix.codes = make([]byte, n*ix.pq.m)
			err = r.Scan(ctx, []byte{recCode}, []byte{recCode + 1}, func(k, v []byte) error {
				id, err := nodeID(k, n)
				if err != nil {
					return err
				}
				if len(v) != ix.pq.m {
					return fmt.Errorf("%w: code of %d bytes", ErrCorrupt, len(v))
				}
				copy(ix.codes[int(id)*ix.pq.m:], v)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	for id, key := range ix.keys {
		if key == nil {
			ix.free = append(ix.free, uint32(id))
			continue
		}
		if _, dead := ix.dead[uint32(id)]; dead {
			continue
		}
		ix.ids[string(key)] = uint32(id)
		ix.live++
	}
	slices.Reverse(ix.free) // pop the lowest first
	return ix, nil
}

func nodeID(k []byte, n int) (uint32, error) {
	if len(k) != 5 {
		return 0, fmt.Errorf("%w: node key of %d bytes", ErrCorrupt, len(k))
	}
	id := binary.BigEndian.Uint32(k[1:])
	if int(id) >= n {
		return 0, fmt.Errorf("%w: node %d past the next id %d", ErrCorrupt, id, n)
	}
	return id, nil
}

// Config returns the index's configuration, defaults filled in.
func (ix *Index) Config() Config { return ix.cfg }

// Len returns the number of items the index holds.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Keys calls fn with the key of every item the index holds (a copy fn may
// keep), in no order.
func (ix *Index) Keys(fn func(key []byte)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for k := range ix.ids {
		fn([]byte(k))
	}
}

// holdsVectors reports whether the index keeps its vectors in memory: all
// but a trained quantizedFlat, which keeps codes.
func (ix *Index) holdsVectors() bool { return ix.cfg.Kind != QuantizedFlat || ix.pq == nil }

// vec returns node id's vector as searched.
func (ix *Index) vec(id uint32) []float32 {
	return ix.vecs[int(id)*ix.dim : (int(id)+1)*ix.dim]
}

func (ix *Index) setVec(id uint32, v []float32) {
	dst := ix.vec(id)
	if ix.cfg.Metric == Cosine {
		n := norm(v)
		if n == 0 {
			copy(dst, v)
			return
		}
		for i, x := range v {
			dst[i] = float32(float64(x) / n)
		}
		return
	}
	copy(dst, v)
}

// Change is one item's new vector, or its removal (Vector nil). Vector must
// come from Normalize.
type Change struct {
	Key    []byte
	Vector []float32
}

// Pending is a transaction's changes to an index: written to its Writer,
// applied to the index in memory, but hidden from searches, which wait,
// until Commit. The index takes no other change meanwhile: the caller
// commits or aborts promptly, once its transaction is applied to the store
// or has failed.
type Pending struct {
	ix   *Index
	w    Writer
	undo []func()
	done bool
	// touched are the diskANN nodes whose edges changed: their records are
	// written once, at Commit's caller's flush.
	touched map[uint32]bool
	metaSet bool
}

// Prepare starts a transaction's changes: it writes each change's records to
// w and returns the Pending that the caller must Commit after the
// transaction is applied to the store (or Abort when it was not). It waits
// for the Pending before it.
func (ix *Index) Prepare(w Writer, changes ...Change) (*Pending, error) {
	ix.mu.Lock()
	p := &Pending{ix: ix, w: w, touched: map[uint32]bool{}}
	if err := p.Add(changes...); err != nil {
		p.Abort()
		return nil, err
	}
	return p, nil
}

// Add writes more changes of the same transaction. After an error the
// Pending can only be aborted.
func (p *Pending) Add(changes ...Change) error {
	if p.done {
		return errors.New("vector: Add on a finished Pending")
	}
	ix := p.ix
	for _, c := range changes {
		if c.Vector != nil && len(c.Vector) != ix.dim {
			return fmt.Errorf("vector: a vector of %d dimensions in an index of %d", len(c.Vector), ix.dim)
		}
		old, had := ix.ids[string(c.Key)]
		if had && c.Vector != nil && ix.sameVector(old, c.Vector) {
			continue // a write that left the vector as it was
		}
		if had {
			if err := p.remove(old); err != nil {
				return err
			}
		}
		if c.Vector != nil {
			if err := p.insert(c.Key, c.Vector); err != nil {
				return err
			}
		}
	}
	if ix.cfg.Kind == DiskANN && len(ix.dead) > 0 {
		if err := p.consolidate(consolidateBudget); err != nil {
			return err
		}
	}
	if ix.cfg.Kind == QuantizedFlat && ix.pq == nil && ix.live >= TrainAt {
		if err := p.train(); err != nil {
			return err
		}
	}
	return p.flush()
}

// sameVector reports whether node id already holds v.
func (ix *Index) sameVector(id uint32, v []float32) bool {
	if !ix.holdsVectors() {
		return false // a trained quantizedFlat keeps codes: rewrite
	}
	if ix.cfg.Metric == Cosine {
		n := norm(v)
		cur := ix.vec(id)
		for i, x := range v {
			if n == 0 && cur[i] != x || n != 0 && cur[i] != float32(float64(x)/n) {
				return false
			}
		}
		return true
	}
	return slices.Equal(ix.vec(id), v)
}

// Commit makes the changes visible to searches and lets the next Pending
// start. Call it once the transaction holding the writes is applied.
func (p *Pending) Commit() {
	if p.done {
		return
	}
	p.done = true
	p.ix.mu.Unlock()
}

// Abort undoes the changes in memory (the caller drops the transaction's
// writes) and lets the next Pending start.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
	p.ix.mu.Unlock()
}

// allocID takes a free id or the next one, growing the node arrays.
func (p *Pending) allocID() uint32 {
	ix := p.ix
	if n := len(ix.free); n > 0 {
		id := ix.free[n-1]
		ix.free = ix.free[:n-1]
		p.undo = append(p.undo, func() { ix.free = append(ix.free, id) })
		return id
	}
	id := ix.m.nextID
	ix.m.nextID++
	ix.keys = append(ix.keys, nil)
	if ix.holdsVectors() {
		ix.vecs = append(ix.vecs, make([]float32, ix.dim)...)
	}
	if ix.cfg.Kind == DiskANN {
		ix.nbrs = append(ix.nbrs, nil)
	}
	if ix.pq != nil {
		ix.codes = append(ix.codes, make([]byte, ix.pq.m)...)
	}
	p.undo = append(p.undo, func() {
		ix.m.nextID--
		ix.keys = ix.keys[:id]
		if ix.vecs != nil {
			ix.vecs = ix.vecs[:int(id)*ix.dim]
		}
		if ix.nbrs != nil {
			ix.nbrs = ix.nbrs[:id]
		}
		if ix.pq != nil {
			ix.codes = ix.codes[:int(id)*ix.pq.m]
		}
	})
	p.metaSet = true
	return id
}

// insert adds a node for key.
func (p *Pending) insert(key []byte, v []float32) error {
	ix := p.ix
	id := p.allocID()
	p.saveSlot(id)
	key = bytes.Clone(key)
	ix.keys[id] = key
	ix.ids[string(key)] = id
	ix.live++
	p.undo = append(p.undo, func() {
		ix.keys[id] = nil
		delete(ix.ids, string(key))
		ix.live--
	})
	if err := p.w.Set(idKey(recNode, id), encodeNode(ix.cfg.DataType, key, v)); err != nil {
		return err
	}
	if err := p.w.Set(itemKey(key), binary.BigEndian.AppendUint32(nil, id)); err != nil {
		return err
	}
	switch ix.cfg.Kind {
	case Flat:
		ix.setVec(id, v)
	case QuantizedFlat:
		if ix.pq == nil {
			ix.setVec(id, v)
		} else {
			code := ix.pq.encode(ix.forQuantizer(v), nil)
			copy(ix.codes[int(id)*ix.pq.m:], code)
			if err := p.w.Set(idKey(recCode, id), code); err != nil {
				return err
			}
		}
	case DiskANN:
		ix.setVec(id, v)
		p.link(id)
	}
	return nil
}

// saveSlot remembers the vector and code of node id, about to be
// overwritten (a reused id), so that Abort puts them back.
func (p *Pending) saveSlot(id uint32) {
	ix := p.ix
	if ix.holdsVectors() {
		old := slices.Clone(ix.vec(id))
		p.undo = append(p.undo, func() {
			if ix.holdsVectors() {
				copy(ix.vec(id), old)
			}
		})
	}
	if ix.pq != nil {
		m := ix.pq.m
		old := slices.Clone(ix.codes[int(id)*m : int(id+1)*m])
		p.undo = append(p.undo, func() {
			if ix.pq != nil && len(ix.codes) >= int(id+1)*m {
				copy(ix.codes[int(id)*m:], old)
			}
		})
	}
}

// remove takes node id's item out of the index: at once for the flat
// kinds; a diskANN node stays linked, for navigation, until consolidation.
func (p *Pending) remove(id uint32) error {
	ix := p.ix
	key := ix.keys[id]
	delete(ix.ids, string(key))
	ix.live--
	p.undo = append(p.undo, func() {
		ix.ids[string(key)] = id
		ix.live++
	})
	if err := p.w.Delete(itemKey(key)); err != nil {
		return err
	}
	if ix.cfg.Kind == DiskANN {
		epoch := ix.m.epoch
		ix.dead[id] = epoch
		p.undo = append(p.undo, func() { delete(ix.dead, id) })
		return p.w.Set(idKey(recDead, id), binary.AppendUvarint(nil, uint64(epoch)))
	}
	return p.freeID(id)
}

// freeID forgets node id and deletes its records.
func (p *Pending) freeID(id uint32) error {
	ix := p.ix
	key := ix.keys[id]
	ix.keys[id] = nil
	ix.free = append(ix.free, id)
	p.undo = append(p.undo, func() {
		ix.keys[id] = key
		ix.free = ix.free[:len(ix.free)-1]
	})
	for _, kind := range []byte{recNode, recEdges, recCode, recDead} {
		if err := p.w.Delete(idKey(kind, id)); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the edges of the nodes touched and the meta.
func (p *Pending) flush() error {
	ix := p.ix
	for id := range p.touched {
		if ix.keys[id] == nil {
			continue // freed since
		}
		if err := p.w.Set(idKey(recEdges, id), encodeEdges(ix.nbrs[id])); err != nil {
			return err
		}
	}
	clear(p.touched)
	if p.metaSet {
		p.metaSet = false
		return p.w.Set([]byte{recMeta}, ix.m.encode())
	}
	return nil
}

// setEdges replaces node id's out-neighbours, remembering the old ones.
func (p *Pending) setEdges(id uint32, nbrs []uint32) {
	ix := p.ix
	old := ix.nbrs[id]
	ix.nbrs[id] = nbrs
	p.undo = append(p.undo, func() { ix.nbrs[id] = old })
	p.touched[id] = true
}

// setMeta changes the meta, remembering the old one.
func (p *Pending) setMeta(f func(m *meta)) {
	ix := p.ix
	old := ix.m
	f(&ix.m)
	p.undo = append(p.undo, func() { ix.m = old })
	p.metaSet = true
}
