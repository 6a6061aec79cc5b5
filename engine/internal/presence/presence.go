package presence

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

const (
	// hashes is the number of bits set per key: with
	// bitsPerKey bits per key, about 1 % false "maybe".
	hashes     = 7
	bitsPerKey = 10
	// firstKeys is the capacity of a filter's first layer; each
	// next layer holds four times the one before.
	firstKeys = 1 << 14
)

// Filter is a growing Bloom filter: layers of increasing size, new
// keys going to the last, a key maybe present when any layer says so. Safe
// for concurrent use.
type Filter struct {
	seed   maphash.Seed
	layers atomic.Pointer[[]*layer]
	ready  atomic.Bool
	grow   sync.Mutex
}

// layer is one fixed-size Bloom filter.
type layer struct {
	words    []atomic.Uint64
	mask     uint64 // bit count - 1, a power of two
	capacity int64
	keys     atomic.Int64
}

func newBloomLayer(capacity int64) *layer {
	n := uint64(capacity * bitsPerKey)
	n = 1 << bits.Len64(n-1) // a power of two, at least 64
	n = max(n, 64)
	return &layer{words: make([]atomic.Uint64, n/64), mask: n - 1, capacity: capacity}
}

// New returns an empty filter, not ready.
func New() *Filter {
	f := &Filter{seed: maphash.MakeSeed()}
	layers := []*layer{newBloomLayer(firstKeys)}
	f.layers.Store(&layers)
	return f
}

// probes returns the two hashes the bit positions of key derive from.
func (f *Filter) probes(key []byte) (h1, h2 uint64) {
	h := maphash.Bytes(f.seed, key)
	return h, h>>32 | h<<32 | 1
}

// Add records key.
func (f *Filter) Add(key []byte) {
	h1, h2 := f.probes(key)
	layers := *f.layers.Load()
	l := layers[len(layers)-1]
	if l.keys.Add(1) > l.capacity {
		l = f.newLayer(l)
	}
	for i := uint64(0); i < hashes; i++ {
		b := (h1 + i*h2) & l.mask
		l.words[b/64].Or(1 << (b % 64))
	}
}

// newLayer adds a layer after full, unless another writer already did, and
// returns the last layer.
func (f *Filter) newLayer(full *layer) *layer {
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

// MayContain reports whether key may have been added; false is certain.
func (f *Filter) MayContain(key []byte) bool {
	h1, h2 := f.probes(key)
	for _, l := range *f.layers.Load() {
		in := true
		for i := uint64(0); i < hashes && in; i++ {
			b := (h1 + i*h2) & l.mask
			in = l.words[b/64].Load()&(1<<(b%64)) != 0
		}
		if in {
			return true
		}
	}
	return false
}

// SetReady marks the filter as holding every key of its set: its owner
// filled it from the store.
func (f *Filter) SetReady() { f.ready.Store(true) }

// Ready reports whether SetReady was called; until then a "no" of
// MayContain proves nothing about keys added before the filter existed.
func (f *Filter) Ready() bool { return f.ready.Load() }

// Layers is the number of layers the filter grew to.
func (f *Filter) Layers() int { return len(*f.layers.Load()) }
