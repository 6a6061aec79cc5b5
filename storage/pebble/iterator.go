package pebble

import (
	"bytes"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// newIterator opens an iterator of src over [lower, upper).
func newIterator(src iterable, lower, upper []byte, reverse bool) (*iterator, error) {
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		return &iterator{}, nil // an empty range; Pebble rejects inverted bounds
	}
	// The options live in the iterator: one allocation for both (Pebble
	// copies them when it opens its iterator).
	i := &iterator{reverse: reverse, opts: pebbledb.IterOptions{LowerBound: lower, UpperBound: upper}}
	it, err := src.NewIter(&i.opts)
	if err != nil {
		return nil, fmt.Errorf("storage/pebble: new iterator: %w", err)
	}
	i.it = it
	return i, nil
}

// iterator is a storage.Iterator on a Pebble iterator; it is nil for an
// empty range.
type iterator struct {
	it      *pebbledb.Iterator
	reverse bool
	started bool
	value   []byte
	err     error
	opts    pebbledb.IterOptions
}

// Next advances to the next key in the range.
func (i *iterator) Next() bool {
	if i.it == nil || i.err != nil {
		return false
	}
	var ok bool
	switch {
	case !i.started:
		i.started = true
		if i.reverse {
			ok = i.it.Last()
		} else {
			ok = i.it.First()
		}
	case i.reverse:
		ok = i.it.Prev()
	default:
		ok = i.it.Next()
	}
	if !ok {
		i.value = nil
		return false
	}
	i.value, i.err = i.it.ValueAndErr()
	if i.err != nil {
		i.err = fmt.Errorf("storage/pebble: reading value of %q: %w", i.it.Key(), i.err)
		i.value = nil
		return false
	}
	return true
}

// Key is the current key.
func (i *iterator) Key() []byte {
	if i.it == nil {
		return nil
	}
	return i.it.Key()
}

// Value is the current value.
func (i *iterator) Value() []byte { return i.value }

// Err is the first error the iterator met, if any.
func (i *iterator) Err() error {
	if i.err != nil {
		return i.err
	}
	if i.it == nil {
		return nil
	}
	if err := i.it.Error(); err != nil {
		return fmt.Errorf("storage/pebble: iterating: %w", err)
	}
	return nil
}

// Close releases the iterator.
func (i *iterator) Close() error {
	if i.it == nil {
		return nil
	}
	it := i.it
	i.it = nil
	if err := it.Close(); err != nil {
		return fmt.Errorf("storage/pebble: closing iterator: %w", err)
	}
	return nil
}
