package memory

import (
	"bytes"
	"iter"

	"github.com/google/btree"
)

// walk yields the entries of tree with lower <= key < upper (nil bounds are
// open), ascending, or descending when reverse is true.
func walk(tree *btree.BTreeG[entry], lower, upper []byte, reverse bool) iter.Seq[entry] {
	return func(yield func(entry) bool) {
		if !reverse {
			visit := func(e entry) bool {
				if upper != nil && bytes.Compare(e.key, upper) >= 0 {
					return false
				}
				return yield(e)
			}
			if lower != nil {
				tree.AscendGreaterOrEqual(entry{key: lower}, visit)
			} else {
				tree.Ascend(visit)
			}
			return
		}
		visit := func(e entry) bool {
			if upper != nil && bytes.Equal(e.key, upper) {
				return true // upper is exclusive
			}
			if lower != nil && bytes.Compare(e.key, lower) < 0 {
				return false
			}
			return yield(e)
		}
		if upper != nil {
			tree.DescendLessOrEqual(entry{key: upper}, visit)
		} else {
			tree.Descend(visit)
		}
	}
}

// treeIterator is a storage.Iterator over one read-only tree.
type treeIterator struct {
	next func() (entry, bool)
	stop func()
	cur  entry
}

func newTreeIterator(tree *btree.BTreeG[entry], lower, upper []byte, reverse bool) *treeIterator {
	next, stop := iter.Pull(walk(tree, lower, upper, reverse))
	return &treeIterator{next: next, stop: stop}
}

// Next advances to the next key in the range.
func (it *treeIterator) Next() bool {
	e, ok := it.next()
	it.cur = e
	return ok
}

// Key is the current key.
func (it *treeIterator) Key() []byte { return it.cur.key }

// Value is the current value.
func (it *treeIterator) Value() []byte { return it.cur.value }

// Err is always nil: an in-memory walk cannot fail.
func (it *treeIterator) Err() error { return nil }

// Close releases the iterator.
func (it *treeIterator) Close() error {
	it.stop()
	it.cur = entry{}
	return nil
}

// mergeIterator is a storage.Iterator over a batch: its pending writes laid
// over the committed keys, pending entries winning on equal keys and pending
// deletions hiding committed keys.
type mergeIterator struct {
	reverse        bool
	base, pending  *treeIterator
	baseOK, pendOK bool
	started        bool
	cur            entry
}

func newMergeIterator(base, pending *btree.BTreeG[entry], lower, upper []byte, reverse bool) *mergeIterator {
	return &mergeIterator{
		reverse: reverse,
		base:    newTreeIterator(base, lower, upper, reverse),
		pending: newTreeIterator(pending, lower, upper, reverse),
	}
}

// compare orders a and b in the direction of iteration.
func (it *mergeIterator) compare(a, b []byte) int {
	c := bytes.Compare(a, b)
	if it.reverse {
		return -c
	}
	return c
}

// Next advances to the next visible key in the range.
func (it *mergeIterator) Next() bool {
	if !it.started {
		it.started = true
		it.baseOK = it.base.Next()
		it.pendOK = it.pending.Next()
	}
	for it.baseOK || it.pendOK {
		var c int
		switch {
		case !it.pendOK:
			c = -1
		case !it.baseOK:
			c = 1
		default:
			c = it.compare(it.base.cur.key, it.pending.cur.key)
		}
		if c < 0 {
			it.cur = it.base.cur
			it.baseOK = it.base.Next()
			return true
		}
		if c == 0 {
			it.baseOK = it.base.Next() // shadowed by the pending entry
		}
		e := it.pending.cur
		it.pendOK = it.pending.Next()
		if !e.deleted {
			it.cur = e
			return true
		}
	}
	it.cur = entry{}
	return false
}

// Key is the current key.
func (it *mergeIterator) Key() []byte { return it.cur.key }

// Value is the current value.
func (it *mergeIterator) Value() []byte { return it.cur.value }

// Err is always nil: an in-memory walk cannot fail.
func (it *mergeIterator) Err() error { return nil }

// Close releases the iterator.
func (it *mergeIterator) Close() error {
	it.base.Close()
	it.pending.Close()
	it.cur = entry{}
	return nil
}
