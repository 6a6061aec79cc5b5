package engine

import "sync"

// durability tracks writes that are applied (visible to readers) but not yet
// durable. The write path applies a partition's commit before its fsync, so the
// next writer of a hot partition can build on it without waiting; readers
// call barrier after reading, so what they return is durable too: nobody is
// ever shown a write that a crash could take back.
type durability struct {
	mu      sync.Mutex
	cond    sync.Cond
	pending map[uint64]struct{}
}

func newDurability() *durability {
	d := &durability{pending: map[uint64]struct{}{}}
	d.cond.L = &d.mu
	return d
}

// applied records that the write with this LSN is visible but not durable.
func (d *durability) applied(lsn uint64) {
	d.mu.Lock()
	d.pending[lsn] = struct{}{}
	d.mu.Unlock()
}

// durable records that the write with this LSN is durable.
func (d *durability) durable(lsn uint64) {
	d.mu.Lock()
	delete(d.pending, lsn)
	d.mu.Unlock()
	d.cond.Broadcast()
}

// barrier waits until every write that was visible when it was called is
// durable. It returns at once when nothing is pending.
func (d *durability) barrier() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return
	}
	waiting := make([]uint64, 0, len(d.pending))
	for lsn := range d.pending {
		waiting = append(waiting, lsn)
	}
	for _, lsn := range waiting {
		for {
			if _, ok := d.pending[lsn]; !ok {
				break
			}
			d.cond.Wait()
		}
	}
}
