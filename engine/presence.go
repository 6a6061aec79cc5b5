package engine

import (
	"context"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/presence"
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
// A container's filter (engine/internal/presence) is made at its first item write after Open and
// filled in the background from a snapshot of its items; until then every
// check reads the store. Writers add the keys they write from the moment the
// filter exists, so none written meanwhile is missed (see build).

// presenceFilters holds each container's presence filter, by RID, and
// builds the new ones in the background. It holds what a build needs: the
// store, the engine's partition locks (Engine.locks, not a copy), Close's
// signal and the background context and wait group.
type presenceFilters struct {
	// filters holds each container's *presence.Filter, by RID.
	filters sync.Map
	store   storage.Store
	locks   []sync.Mutex
	stop    stopSignal
	ctx     context.Context
	bg      *sync.WaitGroup
}

// of returns the container's presence filter, making it (and
// starting its build) when there is none.
func (p *presenceFilters) of(c *Container) *presence.Filter {
	if pf := c.presence.Load(); pf != nil {
		return pf
	}
	f, loaded := p.filters.LoadOrStore(string(c.rid), presence.New())
	pf := f.(*presence.Filter)
	c.presence.Store(pf)
	if !loaded {
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			p.build(p.ctx, c.rid, pf)
		}()
	}
	return pf
}

// build adds every item key of the container to f and marks it
// ready. Writers add their keys from the moment f is published; a writer
// that looked before holds its partition lock until its write is applied,
// so taking and releasing every lock once, after publishing, waits for the
// last of them, and the snapshot taken then holds their writes.
func (p *presenceFilters) build(ctx context.Context, collRID []byte, f *presence.Filter) {
	for i := range p.locks {
		p.locks[i].Lock()
		p.locks[i].Unlock()
	}
	snap, err := p.store.NewSnapshot(ctx)
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
		if n%4096 == 0 && p.stop.closed() {
			return
		}
		f.Add(it.Key())
	}
	if it.Err() == nil {
		f.SetReady()
	}
}

// drop forgets the filter of a deleted container.
func (p *presenceFilters) drop(collRID []byte) { p.filters.Delete(string(collRID)) }
