package memory

import (
	"bytes"
	"iter"

	"github.com/google/btree"

	"github.com/orrery-db/orrery/storage"
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

// writesIn returns a batch's pending writes with keys in [lower, upper),
// ascending, for storage.NewOverlayIterator.
func writesIn(pending *btree.BTreeG[entry], lower, upper []byte) []storage.Write {
	var out []storage.Write
	for e := range walk(pending, lower, upper, false) {
		out = append(out, storage.Write{Key: e.key, Value: e.value, Delete: e.deleted})
	}
	return out
}
