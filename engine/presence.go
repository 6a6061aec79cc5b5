package engine

import (
	"context"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// Every create must prove its id free in its logical partition, and on an
// LSM store a read of a key that is not there still visits every memtable
// and every level: it was a quarter of the CPU of a create. A presence
// filter is a Bloom filter, per container, of every item key ever written:
// when it says a key was never written, the read is skipped. It never
// forgets a key (deletes are not removed), so "absent" is always true; a
// "maybe" costs the read it would have cost anyway.
//
// A container's filter is made at its first item write after Open and
// filled in the background from a snapshot of its items; until then every
// check reads the store. Writers add the keys they write from the moment the
// filter exists, so none written meanwhile is missed (see buildPresence).

const (
	// presenceHashes is the number of bits set per key: with
	// presenceBitsPerKey bits per key, about 1 % false "maybe".
	presenceHashes     = 7
	presenceBitsPerKey = 10
	// presenceFirstKeys is the capacity of a filter's first layer; each
	// next layer holds four times the one before.
	presenceFirstKeys = 1 << 14
)

// presenceFilter is a growing Bloom filter: layers of increasing size, new
// keys going to the last, a key maybe present when any layer says so. Safe
// for concurrent use.
type presenceFilter struct {
	seed   maphash.Seed
	layers atomic.Pointer[[]*bloomLayer]
	ready  atomic.Bool // the build from the store finished
	grow   sync.Mutex
}

// bloomLayer is one fixed-size Bloom filter.
type bloomLayer struct {
	words    []atomic.Uint64
	mask     uint64 // bit count - 1, a power of two
	capacity int64
	keys     atomic.Int64
}

func newBloomLayer(capacity int64) *bloomLayer {
	n := uint64(capacity * presenceBitsPerKey)
	n = 1 << bits.Len64(n-1) // a power of two, at least 64
	n = max(n, 64)
	return &bloomLayer{words: make([]atomic.Uint64, n/64), mask: n - 1, capacity: capacity}
}

func newPresenceFilter() *presenceFilter {
	f := &presenceFilter{seed: maphash.MakeSeed()}
	layers := []*bloomLayer{newBloomLayer(presenceFirstKeys)}
	f.layers.Store(&layers)
	return f
}

// probes returns the two hashes the bit positions of key derive from.
func (f *presenceFilter) probes(key []byte) (h1, h2 uint64) {
	h := maphash.Bytes(f.seed, key)
	return h, h>>32 | h<<32 | 1
}

// add records key.
func (f *presenceFilter) add(key []byte) {
	h1, h2 := f.probes(key)
	layers := *f.layers.Load()
	l := layers[len(layers)-1]
	if l.keys.Add(1) > l.capacity {
		l = f.newLayer(l)
	}
	for i := uint64(0); i < presenceHashes; i++ {
		b := (h1 + i*h2) & l.mask
		l.words[b/64].Or(1 << (b % 64))
	}
}

// newLayer adds a layer after full, unless another writer already did, and
// returns the last layer.
func (f *presenceFilter) newLayer(full *bloomLayer) *bloomLayer {
	f.grow.Lock()
	defer f.grow.Unlock()
	layers := *f.layers.Load()
	if last := layers[len(layers)-1]; last != full {
		return last
	}
	next := append(layers[:len(layers):len(layers)], newBloomLayer(4*full.capacity))
	f.layers.Store(&next)
	return next[len(next)-1]
}

// mayContain reports whether key may have been added; false is certain.
func (f *presenceFilter) mayContain(key []byte) bool {
	h1, h2 := f.probes(key)
	for _, l := range *f.layers.Load() {
		in := true
		for i := uint64(0); i < presenceHashes && in; i++ {
			b := (h1 + i*h2) & l.mask
			in = l.words[b/64].Load()&(1<<(b%64)) != 0
		}
		if in {
			return true
		}
	}
	return false
}

// presenceOf returns the container's presence filter, making it (and
// starting its build) when there is none.
func (e *Engine) presenceOf(c *Container) *presenceFilter {
	if pf := c.presence.Load(); pf != nil {
		return pf
	}
	f, loaded := e.presence.LoadOrStore(string(c.rid), newPresenceFilter())
	pf := f.(*presenceFilter)
	c.presence.Store(pf)
	if !loaded {
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.buildPresence(e.bgCtx, c.rid, pf)
		}()
	}
	return pf
}

// buildPresence adds every item key of the container to f and marks it
// ready. Writers add their keys from the moment f is published; a writer
// that looked before holds its partition lock until its write is applied,
// so taking and releasing every lock once, after publishing, waits for the
// last of them, and the snapshot taken then holds their writes.
func (e *Engine) buildPresence(ctx context.Context, collRID []byte, f *presenceFilter) {
	for i := range e.locks {
		e.locks[i].Lock()
		e.locks[i].Unlock()
	}
	snap, err := e.store.NewSnapshot(ctx)
	if err != nil {
		return // never ready: every check reads the store
	}
	defer snap.Close()
	prefix := keys.ItemContainerPrefix(collRID)
	it, err := snap.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		return // never ready: every check reads the store
	}
	defer it.Close()
	for n := 0; it.Next(); n++ {
		if n%4096 == 0 && e.stopping() {
			return
		}
		f.add(it.Key())
	}
	if it.Err() == nil {
		f.ready.Store(true)
	}
}

// absent reports whether the item key was certainly never written.
// On a shared store nothing is: another gateway may have written it.
func (e *Engine) absent(c *Container, key []byte) bool { return e.seam.absent(c, key) }

// absentHere is absent for an engine alone on its store.
func (e *Engine) absentHere(c *Container, key []byte) bool {
	f := e.presenceOf(c)
	return f.ready.Load() && !f.mayContain(key)
}
