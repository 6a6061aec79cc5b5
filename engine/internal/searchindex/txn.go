package searchindex

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/vector"
)

// RebuildChunk is how many items one batch of a rebuild indexes.
const RebuildChunk = 256

// Txn is a transaction's pending changes to its container's search
// indexes: every index is prepared at the transaction's first item write
// (always in the same order, so that two transactions never wait for each
// other's indexes), and committed or aborted with the transaction.
type Txn struct {
	vecs   []*vector.Pending // nil for an index with a shard key
	shards []*shardTxn       // nil for one without
	texts  []*fulltext.Pending
}

// Begin prepares every index of st with w (in Shared mode, with the
// index's own memory).
func (sx *Txn) Begin(st *State, w vector.Writer) error {
	for _, v := range st.Vectors {
		if v.shards != nil {
			sx.vecs, sx.shards = append(sx.vecs, nil), append(sx.shards, v.shards.begin(w))
			continue
		}
		p, err := v.Index.Prepare(v.space.writer(w))
		if err != nil {
			return err
		}
		sx.vecs, sx.shards = append(sx.vecs, p), append(sx.shards, nil)
	}
	for _, t := range st.Texts {
		p, err := t.Index.Prepare(t.space.writer(w))
		if err != nil {
			return err
		}
		sx.texts = append(sx.texts, p)
	}
	return nil
}

// Add writes one item's change: its vectors and texts as get reads them
// (get nil: the item is deleted). key is the item key's part after the
// container's item prefix.
func (sx *Txn) Add(st *State, key []byte, get Getter) error {
	for i, v := range st.Vectors {
		ch := vector.Change{Key: key}
		if get != nil {
			ch.Vector = VectorAt(get(v.segs), v.cfg)
		}
		if v.shards != nil {
			enc := ""
			if get != nil {
				enc = shardEncoding(get(v.shards.segs))
			}
			if err := sx.shards[i].add(key, ch.Vector, enc); err != nil {
				return err
			}
			continue
		}
		if err := sx.vecs[i].Add(ch); err != nil {
			return err
		}
	}
	for i, t := range st.Texts {
		ch := fulltext.Change{Key: key}
		if get != nil {
			var s string
			if raw := get(t.segs); raw != nil && json.Unmarshal(raw, &s) == nil {
				ch.Text = &s
			}
		}
		if err := sx.texts[i].Add(ch); err != nil {
			return err
		}
	}
	return nil
}

// Commit makes the transaction's index changes visible; call it once the
// transaction's batch is applied.
func (sx *Txn) Commit() {
	if sx == nil {
		return
	}
	for i, p := range sx.vecs {
		if p == nil {
			sx.shards[i].commit()
			continue
		}
		p.Commit()
	}
	for _, p := range sx.texts {
		p.Commit()
	}
}

// Abort undoes them (a no-op after Commit).
func (sx *Txn) Abort() {
	if sx == nil {
		return
	}
	for i := len(sx.texts) - 1; i >= 0; i-- {
		sx.texts[i].Abort()
	}
	for i := len(sx.vecs) - 1; i >= 0; i-- {
		if sx.vecs[i] == nil {
			sx.shards[i].abort()
			continue
		}
		sx.vecs[i].Abort()
	}
}

// Write is one storage transaction's changes to its container's indexes
// (Reindex); the zero value has none yet.
type Write struct {
	sx *Txn
	st *State
}

// Commit makes them visible; call it once the transaction's batch is
// applied.
func (w *Write) Commit() { w.sx.Commit() }

// Abort undoes them (a no-op after Commit).
func (w *Write) Abort() { w.sx.Abort() }

// Getter returns the raw value of a document's property path, nil when it
// has none.
type Getter func(segs []string) json.RawMessage

// DocGetter reads paths of a stored document's JSON.
func DocGetter(doc []byte) Getter {
	return func(segs []string) json.RawMessage { return RawAt(doc, segs) }
}

// ObjectGetter reads paths of a parsed document (the write path has it so).
func ObjectGetter(o jsondoc.Object) Getter {
	return func(segs []string) json.RawMessage {
		v, ok := o.Get(segs[0])
		if !ok {
			return nil
		}
		return RawAt(v, segs[1:])
	}
}

// RawAt returns the value at segs under the JSON value raw, nil when absent
// (read as the write path reads a parsed document: ObjectGetter).
func RawAt(raw json.RawMessage, segs []string) json.RawMessage {
	for _, s := range segs {
		o, err := jsondoc.Parse(raw)
		if err != nil {
			return nil
		}
		var ok bool
		if raw, ok = o.Get(s); !ok {
			return nil
		}
	}
	return raw
}

// VectorAt reads an embedding: nil when raw is not an array of numbers that
// fits the index (the service leaves such an item out of it).
func VectorAt(raw json.RawMessage, cfg vector.Config) []float32 {
	if raw == nil {
		return nil
	}
	xs, ok := parseNumberArray(raw)
	if !ok {
		return nil
	}
	v, ok := vector.Normalize(cfg, xs)
	if !ok {
		return nil
	}
	return v
}

// parseNumberArray reads a JSON array of numbers (an embedding), without
// encoding/json's reflection: on the write path of every item it is most of
// what a vector index costs.
func parseNumberArray(raw []byte) ([]float64, bool) {
	i := jsondoc.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	out := make([]float64, 0, bytes.Count(raw, []byte{','})+1)
	i = jsondoc.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, jsondoc.SkipSpace(raw, i+1) == len(raw)
	}
	for {
		j := i
		for j < len(raw) && (raw[j] == '-' || raw[j] == '+' || raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E' || raw[j] >= '0' && raw[j] <= '9') {
			j++
		}
		if j == i || !json.Valid(raw[i:j]) {
			return nil, false
		}
		x, err := strconv.ParseFloat(string(raw[i:j]), 64)
		if err != nil {
			return nil, false
		}
		out = append(out, x)
		i = jsondoc.SkipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = jsondoc.SkipSpace(raw, i+1)
		case ']':
			return out, jsondoc.SkipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}
