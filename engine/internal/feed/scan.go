package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// Bounds on the work of one change feed request, so a narrowly scoped reader
// (one partition key of many, or a start time far ahead) gets bounded work
// per request: it answers 200 with what it found and resumes from where the
// scan stopped. Records outside the scope cost a key comparison; records in
// it cost a read.
const (
	MaxScan    = 200000
	MaxExamine = 10000
)

// Scope decides which item keys a scoped change feed reports: those of
// one logical partition (Prefix) in an effective partition key range
// (InRange).
type Scope struct {
	C Container
	// Prefix is the logical partition's item key prefix, nil when the
	// feed is not scoped to one.
	Prefix []byte
	// InRange reports whether an effective partition key is in the
	// feed's range; nil means every one is.
	InRange func(epk []byte) bool
	// EPK is the effective partition key InRange tests for an item key;
	// nil means the one in the key.
	EPK func(itemKey []byte) []byte
	// Min and Max are the effective partition key span InRange tests
	// (Max exclusive), nil where the span is open; they let a caller that
	// places ranges on several databases tell which ones a scope reaches.
	Min, Max []byte
}

// Contains reports whether the item with key itemKey is in the scope.
func (s *Scope) Contains(itemKey []byte) bool {
	if s.Prefix != nil && !bytes.HasPrefix(itemKey, s.Prefix) {
		return false
	}
	if s.InRange == nil {
		return true
	}
	if s.EPK != nil {
		epk := s.EPK(itemKey)
		return epk != nil && s.InRange(epk)
	}
	return s.InRange(s.C.ItemEPK(itemKey))
}

// Page collects one page. A page ends only between sequence numbers:
// the continuation says "everything at or below Position is done", so the
// records of one transaction are never split across pages.
type Page struct {
	Size     int
	Items    [][]byte
	Bytes    int
	Scanned  int    // records passed over
	Examined int    // records read in scope
	Position uint64 // last sequence number fully covered
	Capped   bool   // stopped early with more left to read
	lastLSN  uint64
}

// next reports whether the record at lsn may still go into the page; when
// not, the page is complete at the previous sequence number.
func (p *Page) next(lsn uint64) bool {
	if lsn != p.lastLSN {
		// Every record of the previous sequence number has been seen.
		if p.lastLSN != 0 {
			p.Position = p.lastLSN
		}
		if len(p.Items) >= p.Size || p.Scanned >= MaxScan || p.Examined >= MaxExamine {
			p.Capped = true
			return false
		}
		p.lastLSN = lsn
	}
	p.Scanned++
	return true
}

func (p *Page) add(doc []byte) {
	p.Items = append(p.Items, doc)
	p.Bytes += len(doc)
}

// finish closes a page whose scan reached upto without being capped.
func (p *Page) finish(upto uint64) {
	if !p.Capped {
		p.Position = upto
	}
}

// LSNRange returns the keys under prefix, each prefix and a big-endian
// sequence number, of the sequence numbers in (from, upto].
func LSNRange(prefix []byte, from, upto uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), from+1)
	upper = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), upto+1)
	return lower, upper
}

// ScanLatest fills page from the latest-version index: items whose current
// version has a sequence number in (from, upto]. It reads the index a chunk
// at a time, then the chunk's items in scope in one go (storage.GetMany).
// item turns each stored item in scope into the document the page carries,
// nil to leave it out (expired, or older than the feed's start time).
func ScanLatest(ctx context.Context, r storage.Reader, scope *Scope, from, upto uint64, page *Page, item func(itemKey, value []byte) ([]byte, error)) error {
	prefix := keys.FeedPrefix(scope.C.RID)
	lower, upper := LSNRange(prefix, from, upto)
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return err
	}
	defer it.Close()
	err = LookupChunks(ctx, r, it, scope.Contains, func(k, itemKey, v []byte) (bool, error) {
		if len(k) < len(prefix)+8 {
			return false, errors.New("engine: corrupt change feed key")
		}
		if !page.next(binary.BigEndian.Uint64(k[len(prefix):])) {
			return false, nil
		}
		if itemKey == nil {
			return true, nil
		}
		page.Examined++
		if v == nil {
			return true, nil
		}
		doc, err := item(itemKey, v)
		if err != nil {
			return false, err
		}
		if doc != nil {
			page.add(doc)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	page.finish(upto)
	return nil
}

// ScanVersions fills page from the all-versions-and-deletes log: the
// records in scope with a sequence number in (from, upto] and made at or
// after since (Unix seconds), in the wire format (Container.Document).
func ScanVersions(ctx context.Context, r storage.Reader, scope *Scope, from, upto uint64, since int64, page *Page) error {
	prefix := keys.VersionPrefix(scope.C.RID)
	lower, upper := LSNRange(prefix, from, upto)
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			return errors.New("engine: corrupt change log key")
		}
		lsn := binary.BigEndian.Uint64(k[len(prefix):])
		if !page.next(lsn) {
			return nil
		}
		rec, err := DecodeRecord(lsn, it.Value())
		if err != nil {
			return err
		}
		if !scope.Contains(rec.ItemKey) || rec.Crts < since {
			continue
		}
		page.Examined++
		page.add(scope.C.Document(rec))
	}
	if err := it.Err(); err != nil {
		return err
	}
	page.finish(upto)
	return nil
}

// maxChunk is the most items a chunked scan reads in one go.
const maxChunk = 256

// ChunkSize is how many item keys a scan of index or order entries
// collects before it reads their items in one go (storage.GetMany): one
// at a time from a reader without storage.MultiGetter (a Get is cheap
// there), else a few for the first chunk, so that a page that needs few
// items reads few, then as many as a page of PostgreSQL's iterator.
func ChunkSize(r storage.Reader, first bool) int {
	switch _, many := r.(storage.MultiGetter); {
	case !many:
		return 1
	case first:
		return 32
	default:
		return maxChunk
	}
}

// LookupChunks visits the entries of it, which name items (the entry's
// value is the item's key), and reads the items a chunk at a time, each
// chunk's in one go (storage.GetMany; chunks of ChunkSize). An entry
// whose item inScope refuses is visited with a nil item key and value;
// an absent item has a nil value. visit returns false to stop.
func LookupChunks(ctx context.Context, r storage.Reader, it storage.Iterator, inScope func(itemKey []byte) bool, visit func(key, itemKey, value []byte) (bool, error)) error {
	type entry struct {
		key, itemKey []byte // itemKey nil: out of scope
	}
	var entries []entry
	var keys [][]byte
	for first, more := true, true; more; first = false {
		entries, keys = entries[:0], keys[:0]
		// Entries out of scope cost a comparison: a chunk holds a bounded
		// number of them besides the ones whose items it reads.
		for n := ChunkSize(r, first); len(keys) < n && len(entries) < 4*maxChunk; {
			if !it.Next() {
				more = false
				break
			}
			en := entry{key: bytes.Clone(it.Key())}
			if itemKey := it.Value(); inScope(itemKey) {
				en.itemKey = bytes.Clone(itemKey)
				keys = append(keys, en.itemKey)
			}
			entries = append(entries, en)
		}
		if err := it.Err(); err != nil {
			return err
		}
		var values [][]byte
		if len(keys) > 0 {
			var err error
			if values, err = storage.GetMany(ctx, r, keys); err != nil {
				return err
			}
		}
		next := 0
		for _, en := range entries {
			var v []byte
			if en.itemKey != nil {
				v = values[next]
				next++
			}
			if ok, err := visit(en.key, en.itemKey, v); err != nil || !ok {
				return err
			}
		}
	}
	return nil
}

// WithLSN returns a copy of an item's JSON with its _lsn system property,
// as the change feed carries it.
func WithLSN(doc []byte, lsn uint64) []byte {
	end := bytes.LastIndexByte(doc, '}')
	if end < 0 {
		return append([]byte(nil), doc...)
	}
	out := make([]byte, 0, len(doc)+32)
	out = append(out, doc[:end]...)
	if t := bytes.TrimSpace(doc[:end]); len(t) > 0 && t[len(t)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, `"_lsn":`...)
	out = strconv.AppendUint(out, lsn, 10)
	return append(out, doc[end:]...)
}
