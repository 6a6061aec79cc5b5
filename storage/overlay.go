package storage

import (
	"bytes"
	"sort"
)

// Write is a batch's pending write of one key: Value to be stored under
// Key, or, when Delete is set, Key to be removed.
type Write struct {
	Key, Value []byte
	Delete     bool
}

// NewOverlayIterator returns an iterator over a batch's view of [lower,
// upper) (nil bounds are open), ascending or descending when reverse is
// true: the keys of base, an iterator of the store over the same range and
// direction, with the batch's pending writes laid over them. A write wins
// over a base key equal to it; a deletion hides it. writes must be sorted
// by ascending key, one per key; those outside [lower, upper) are ignored,
// so a batch may pass all of its writes or only those in range. Neither
// base's keys nor writes are copied: the batch must not change writes while
// the iterator is open. Err is base's; Close closes base.
//
// Backends whose batches cannot merge reads natively (memory, PostgreSQL)
// use it; Pebble's indexed batches iterate over their writes themselves.
func NewOverlayIterator(base Iterator, writes []Write, lower, upper []byte, reverse bool) Iterator {
	start := 0
	if lower != nil {
		start = sort.Search(len(writes), func(i int) bool { return bytes.Compare(writes[i].Key, lower) >= 0 })
	}
	end := len(writes)
	if upper != nil {
		end = start + sort.Search(len(writes)-start, func(i int) bool { return bytes.Compare(writes[start+i].Key, upper) >= 0 })
	}
	return &overlayIterator{base: base, writes: writes[start:end], reverse: reverse}
}

// overlayIterator is NewOverlayIterator's iterator.
type overlayIterator struct {
	base    Iterator
	writes  []Write // in range, ascending
	reverse bool
	n       int  // writes consumed, from the end when reverse
	started bool // base has been positioned
	baseOK  bool // base is on a key
	// onBase is set when the current entry is base's: base moves on at the
	// next call to Next, not before, as its key is valid only until then.
	onBase bool
	failed bool // base stopped on an error
	// key and value are the current entry, base's or a write's.
	key, value []byte
}

// write is the next write in the direction of iteration, if any is left.
func (it *overlayIterator) write() (*Write, bool) {
	if it.n >= len(it.writes) {
		return nil, false
	}
	if it.reverse {
		return &it.writes[len(it.writes)-1-it.n], true
	}
	return &it.writes[it.n], true
}

// advance moves base to its next key.
func (it *overlayIterator) advance() {
	it.baseOK = it.base.Next()
	if !it.baseOK && it.base.Err() != nil {
		it.failed = true
	}
}

// Next advances to the next key of the batch's view. It stops, with Err
// set, when base fails.
func (it *overlayIterator) Next() bool {
	if !it.started || it.onBase {
		it.started, it.onBase = true, false
		it.advance()
	}
	for !it.failed {
		w, writeOK := it.write()
		if !it.baseOK && !writeOK {
			break
		}
		c := 1 // which comes first: < 0 base's key, > 0 the write, 0 both
		if it.baseOK && writeOK {
			c = bytes.Compare(it.base.Key(), w.Key)
			if it.reverse {
				c = -c
			}
		} else if it.baseOK {
			c = -1
		}
		if c < 0 {
			it.onBase = true
			it.key, it.value = it.base.Key(), it.base.Value()
			return true
		}
		it.n++
		if c == 0 {
			it.advance() // base's key is shadowed by the write
		}
		if !w.Delete {
			it.key, it.value = w.Key, w.Value
			return true
		}
	}
	it.key, it.value = nil, nil
	return false
}

// Key is the current key.
func (it *overlayIterator) Key() []byte { return it.key }

// Value is the current value.
func (it *overlayIterator) Value() []byte { return it.value }

// Err is the base iterator's error.
func (it *overlayIterator) Err() error { return it.base.Err() }

// Close closes the base iterator.
func (it *overlayIterator) Close() error {
	it.key, it.value, it.writes = nil, nil, nil
	return it.base.Close()
}
