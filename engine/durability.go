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
	// waiting is how many barriers wait (for tests).
	waiting int
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
	d.waiting++
	for _, lsn := range waiting {
		for {
			if _, ok := d.pending[lsn]; !ok {
				break
			}
			d.cond.Wait()
		}
	}
	d.waiting--
}

// waitFor waits until the write with this LSN is durable, when it is
// pending: a reader that shows one record only (a point read) waits for
// that record's write, not for every write then pending. A write is
// pending from before it is visible (localSeam.inPartition), so a visible
// record whose LSN is not pending is durable.
func (d *durability) waitFor(lsn uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pending[lsn]; !ok {
		return
	}
	d.waiting++
	for {
		if _, ok := d.pending[lsn]; !ok {
			break
		}
		d.cond.Wait()
	}
	d.waiting--
}

// waiters is how many barriers wait now.
func (d *durability) waiters() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting
}
