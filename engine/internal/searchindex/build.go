package searchindex

import (
	"bytes"
	"context"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// Building a container's indexes: made for its Spec, loaded from their
// keyspaces, and filled from the container's items (a Local rebuild, a
// Shared load) by one scan.

// make makes st's indexes for spec, not loaded, each with the keyspace
// space gives it for its prefix.
func (st *State) make(spec Spec, space func(prefix []byte) keyspace) {
	for _, v := range spec.Vectors {
		prefix := keys.SearchIndexPrefix(spec.RID, keys.SearchVector, v.Path)
		vi := &VectorIndex{Path: v.Path, segs: pathSegments(v.Path), cfg: v.Config, space: space(prefix)}
		if v.ShardKey != "" {
			vi.shards = newShards(v.Config, v.ShardKey, prefix, space)
		}
		st.Vectors = append(st.Vectors, vi)
	}
	for _, t := range spec.Texts {
		st.Texts = append(st.Texts, &TextIndex{Path: t.Path, segs: pathSegments(t.Path),
			space: space(keys.SearchIndexPrefix(spec.RID, keys.SearchFullText, t.Path))})
	}
}

// load loads every index of st from its keyspace as r has it.
func (st *State) load(ctx context.Context, r storage.Reader) error {
	for i, v := range st.Vectors {
		if v.shards != nil {
			// An empty index gives the configuration, defaults filled in.
			probe, err := vector.Open(ctx, prefixedReader{emptyReader{}, nil}, st.spec.Vectors[i].Config)
			if err != nil {
				return err
			}
			v.cfg = probe.Config()
			v.shards.cfg = v.cfg
			if err := v.shards.load(ctx, r); err != nil {
				return err
			}
			continue
		}
		ix, err := vector.Open(ctx, v.space.reader(r), st.spec.Vectors[i].Config)
		if err != nil {
			return err
		}
		v.Index = ix
		v.cfg = ix.Config()
	}
	for i, t := range st.Texts {
		ix, err := fulltext.Open(ctx, t.space.reader(r), st.spec.Texts[i].Language)
		if err != nil {
			return err
		}
		t.Index = ix
	}
	return nil
}

// item is one stored item a build indexes: its key after the container's
// item prefix, and its document.
type item struct {
	suffix []byte
	doc    []byte
}

// scanItems calls index with the items of the container of rid that r
// holds, in key order, RebuildChunk of them at a time (their own copies).
func scanItems(ctx context.Context, decode func(key, value []byte) ([]byte, error), rid []byte, r storage.Reader, index func([]item) error) error {
	prefix := keys.ItemContainerPrefix(rid)
	it, err := r.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		return err
	}
	defer it.Close()
	var chunk []item
	for it.Next() {
		doc, err := decode(it.Key(), it.Value())
		if err != nil {
			return err
		}
		chunk = append(chunk, item{bytes.Clone(it.Key()[len(prefix):]), bytes.Clone(doc)})
		if len(chunk) == RebuildChunk {
			if err := index(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if len(chunk) == 0 {
		return nil
	}
	return index(chunk)
}

// indexChunk indexes chunk into st's indexes, prepared with w (a batch
// that commit commits; in Shared mode nil, the indexes' own memory, and
// commit nil), and commits them once the batch is.
func indexChunk(st *State, w vector.Writer, chunk []item, commit func() error) error {
	sx := &Txn{}
	defer sx.Abort()
	if err := sx.Begin(st, w); err != nil {
		return err
	}
	for _, it := range chunk {
		if err := sx.Add(st, it.suffix, DocGetter(it.doc)); err != nil {
			return err
		}
	}
	if commit != nil {
		if err := commit(); err != nil {
			return err
		}
	}
	sx.Commit()
	return nil
}
