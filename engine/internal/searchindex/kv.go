package searchindex

import (
	"context"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// keyspace is where one index keeps its state: the store's keys under its
// prefix (Local), or this process's memory (Shared).
type keyspace interface {
	// reader reads the keyspace as r has it.
	reader(r storage.Reader) kvReader
	// writer writes the keyspace through w, a transaction's batch.
	writer(w vector.Writer) vector.Writer
	// countedIn is where the index's counters were read from, of the
	// store and a query's snapshot r.
	countedIn(store, r storage.Reader) storage.Reader
}

// kvReader is vector.Reader and fulltext.Reader (one shape).
type kvReader interface {
	Get(ctx context.Context, key []byte) ([]byte, error)
	Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error
}

// stored is an index's keyspace in the store, under prefix.
type stored struct{ prefix []byte }

func (s stored) reader(r storage.Reader) kvReader               { return prefixedReader{r, s.prefix} }
func (s stored) writer(w vector.Writer) vector.Writer           { return prefixedWriter{w, s.prefix} }
func (stored) countedIn(store, _ storage.Reader) storage.Reader { return store }

// inMemory is an index's keyspace in this process's memory.
type inMemory struct{ mem *vector.MemStore }

func (m inMemory) reader(storage.Reader) kvReader             { return m.mem }
func (m inMemory) writer(vector.Writer) vector.Writer         { return m.mem }
func (inMemory) countedIn(_, r storage.Reader) storage.Reader { return r }

// prefixedReader reads one index's keyspace: the store's keys under prefix.
type prefixedReader struct {
	r      storage.Reader
	prefix []byte
}

func (p prefixedReader) key(k []byte) []byte {
	out := make([]byte, 0, len(p.prefix)+len(k))
	return append(append(out, p.prefix...), k...)
}

// Get implements vector.Reader and fulltext.Reader.
func (p prefixedReader) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := p.r.Get(ctx, p.key(key))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, err
}

// Scan implements vector.Reader and fulltext.Reader.
func (p prefixedReader) Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	hi := storage.PrefixEnd(p.prefix)
	if upper != nil {
		hi = p.key(upper)
	}
	it, err := p.r.NewIterator(ctx, p.key(lower), hi, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		if err := fn(it.Key()[len(p.prefix):], it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

// prefixedWriter writes one index's keyspace into a storage batch.
type prefixedWriter struct {
	b      vector.Writer
	prefix []byte
}

// Set implements vector.Writer and fulltext.Writer.
func (p prefixedWriter) Set(key, value []byte) error {
	return p.b.Set(prefixedReader{prefix: p.prefix}.key(key), value)
}

// Delete implements vector.Writer and fulltext.Writer.
func (p prefixedWriter) Delete(key []byte) error {
	return p.b.Delete(prefixedReader{prefix: p.prefix}.key(key))
}

// heldWriter holds writes until release, then passes them on to b.
type heldWriter struct {
	held vector.Batch
	b    storage.Batch
}

// Set implements vector.Writer.
func (h *heldWriter) Set(key, value []byte) error {
	if h.b != nil {
		return h.b.Set(key, value)
	}
	return h.held.Set(key, value)
}

// Delete implements vector.Writer.
func (h *heldWriter) Delete(key []byte) error {
	if h.b != nil {
		return h.b.Delete(key)
	}
	return h.held.Delete(key)
}

// release writes what was held to b, and what follows straight to it.
func (h *heldWriter) release(b storage.Batch) error {
	h.b = b
	err := h.held.Apply(b)
	h.held = vector.Batch{}
	return err
}

// emptyReader is a keyspace with nothing in it: a rebuild opens its indexes
// on it.
type emptyReader struct{}

func (emptyReader) Get(context.Context, []byte) ([]byte, error) { return nil, storage.ErrNotFound }

func (emptyReader) NewIterator(context.Context, []byte, []byte, bool) (storage.Iterator, error) {
	return emptyIterator{}, nil
}

type emptyIterator struct{}

func (emptyIterator) Next() bool    { return false }
func (emptyIterator) Key() []byte   { return nil }
func (emptyIterator) Value() []byte { return nil }
func (emptyIterator) Err() error    { return nil }
func (emptyIterator) Close() error  { return nil }
