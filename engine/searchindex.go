package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/storage"
)

// The search indexes of the containers (vector and full-text) are kept by
// engine/internal/searchindex, locally in the store or, on a shared store,
// in each gateway's memory (its package documentation says how). This file
// adapts it to the engine: a container's policy becomes the indexes' Spec,
// an item write reindexes in its transaction (txn.reindex), and a query
// takes a view of the indexes (searchvector.go, searchtext.go,
// searchrank.go) through searchIndexes, which knows the store and the
// clock but not the engine.

// searchIndexes is the engine's search indexes and what the searches that
// use them need of the engine.
type searchIndexes struct {
	set   *searchindex.Set
	store storage.Store
	now   func() time.Time
	// successor returns the current definition of a replaced container.
	successor func(*Container) (*Container, error)
}

// searchMode is how the indexes are kept on store: in the store; in each
// gateway's memory on a shared store; none on a store over several places,
// whose LSNs of one place are not ordered with another's (searches are
// exact).
func searchMode(store storage.Store) searchindex.Mode {
	if _, ok := store.(storage.Shared); !ok {
		return searchindex.Local
	}
	if p, ok := store.(interface{ Places() int }); ok && p.Places() > 1 {
		return searchindex.Off
	}
	return searchindex.Shared
}

// newSearchIndexes returns the search indexes of an engine on store.
func newSearchIndexes(bgCtx context.Context, bg *sync.WaitGroup, store storage.Store, log *slog.Logger, now func() time.Time, successor func(*Container) (*Container, error)) searchIndexes {
	return searchIndexes{
		set: searchindex.New(searchindex.Options{
			Mode:  searchMode(store),
			Store: store,
			Decode: func(key, value []byte) ([]byte, error) {
				s, err := decodeItem(key, value)
				if err != nil {
					return nil, err
				}
				return s.doc, nil
			},
			Purge: func(ctx context.Context, prefix []byte) error { return purgePrefix(ctx, store, prefix) },
			Log:   log,
			Ctx:   bgCtx,
			Bg:    bg,
		}),
		store:     store,
		now:       now,
		successor: successor,
	}
}

// searchContainer is a container as the search indexes see it.
type searchContainer struct {
	c         *Container
	successor func(*Container) (*Container, error)
}

func (s searchContainer) Spec() searchindex.Spec { return searchSpec(s.c) }
func (s searchContainer) RID() []byte            { return s.c.rid }
func (s searchContainer) HasIndexes() bool       { return hasSearchIndexes(s.c) }
func (s searchContainer) Retired() bool          { return s.c.retired.Load() }

func (s searchContainer) Successor() (searchindex.Container, error) {
	next, err := s.successor(s.c)
	if err != nil {
		return nil, err
	}
	return searchContainer{next, s.successor}, nil
}

func (s *searchIndexes) container(c *Container) searchContainer {
	return searchContainer{c, s.successor}
}

// searchSpec is what c's search indexes are built for: the vector indexes'
// paths and configurations and the full-text indexes' paths and languages.
func searchSpec(c *Container) searchindex.Spec {
	spec := searchindex.Spec{RID: c.rid, Name: c.ID}
	if sp := c.Search(); sp != nil {
		if sp.Vector != nil {
			for _, ix := range sp.Vector.Indexes {
				vs := searchindex.VectorSpec{Path: ix.Path, Config: ix.Config}
				if len(ix.ShardKey) > 0 {
					vs.ShardKey = ix.ShardKey[0]
				}
				spec.Vectors = append(spec.Vectors, vs)
			}
		}
		if sp.FullText != nil {
			for _, p := range sp.FullText.Paths {
				if p.Indexed {
					spec.Texts = append(spec.Texts, searchindex.TextSpec{Path: p.Path, Language: p.Language})
				}
			}
		}
	}
	spec.Fingerprint = searchindex.Fingerprint(spec.Vectors, spec.Texts)
	return spec
}

// searchFingerprint is what c's search indexes are built for, "" when it
// has none.
func searchFingerprint(c *Container) string { return searchSpec(c).Fingerprint }

// hasSearchIndexes reports whether c's policy names a vector or full-text
// index.
func hasSearchIndexes(c *Container) bool {
	sp := c.Search()
	if sp == nil {
		return false
	}
	if sp.Vector != nil && len(sp.Vector.Indexes) > 0 {
		return true
	}
	if sp.FullText != nil {
		for _, p := range sp.FullText.Paths {
			if p.Indexed {
				return true
			}
		}
	}
	return false
}

// of returns c's open search indexes, opening or building them first; nil
// when c has none or the store is over several places.
func (s *searchIndexes) of(c *Container) (*searchindex.State, error) {
	return s.set.Of(s.container(c))
}

// kept reports whether search indexes are kept on this engine's store.
func (s *searchIndexes) kept() bool { return s.set.Kept() }

// policyReplaced is called with the batch of a container replace: when the
// search indexes change their state is marked stale in the batch
// (searchindex.Set.PolicyReplaced). They are rebuilt when next used.
func (s *searchIndexes) policyReplaced(b storage.Batch, prev, next *Container) error {
	return s.set.PolicyReplaced(b, next.rid, searchFingerprint(prev), searchFingerprint(next))
}

// drop forgets a deleted container's indexes.
func (s *searchIndexes) drop(collRID []byte) { s.set.Drop(collRID) }

// forgetDeleted forgets the indexes of the containers dbs, a catalog just
// reloaded, no longer holds: another gateway deleted them (and maybe
// created another of the same name, whose RID is new).
func (s *searchIndexes) forgetDeleted(dbs map[string]*Database) {
	live := map[string]bool{}
	for _, db := range dbs {
		for _, c := range db.colls {
			live[string(c.rid)] = true
		}
	}
	s.set.Retain(func(rid []byte) bool { return live[string(rid)] })
}

// reindex changes c's search indexes for one item write (doc nil: a
// delete) in the transaction of b, numbered lsn; w is the transaction's
// pending changes.
func (s *searchIndexes) reindex(w *searchindex.Write, c *Container, b storage.Batch, lsn uint64, key []byte, doc jsondoc.Object) error {
	if c.Search() == nil {
		return nil
	}
	var get searchindex.Getter
	if doc != nil {
		get = searchindex.ObjectGetter(doc)
	}
	return s.set.Reindex(w, b, lsn, s.container(c), key[len(keys.ItemContainerPrefix(c.rid)):], get)
}

// viewOf returns c's search indexes and the view of them a query over r
// may take (searchindex.Set.View). The caller calls the view's Done once
// its searches are over.
func (s *searchIndexes) viewOf(ctx context.Context, c *Container, r storage.Reader) (*searchindex.State, *searchindex.View, error) {
	return s.set.View(ctx, s.container(c), r)
}

// snapshotIndexes returns c's search indexes when the snapshot r holds
// their state whole for c's current policy, so that reading their
// postings from r answers for r's items, with the view the query takes of
// them (viewOf: on a shared store, the indexes are the gateway's, caught
// up with r); nil in a transaction (a stored procedure's query), when c
// has none, or when r was taken before a rebuild finished.
func (s *searchIndexes) snapshotIndexes(ctx context.Context, c *Container, r storage.Reader) (*searchindex.State, *searchindex.View, error) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return nil, nil, nil
	}
	st, view, err := s.viewOf(ctx, c, r)
	if err != nil || st == nil {
		return nil, nil, err
	}
	whole, err := s.set.Whole(ctx, st, r)
	if err != nil || !whole {
		return nil, nil, err
	}
	return st, view, nil
}

// withQuerySnapshot marks ctx as a query's over a snapshot taken at
// watermark w, for the search indexes of a shared store.
func (s *searchIndexes) withQuerySnapshot(ctx context.Context, w uint64) context.Context {
	return s.set.WithQuery(ctx, w)
}

// staleHolding returns the keys of the view's stale items that hold any of the
// keywords in the text at ti's path as r has them (FullTextContainsAny's
// match): the stale items a ranking by FullTextScore takes as candidates.
func staleHolding(ctx context.Context, v *searchindex.View, c *Container, r storage.Reader, ti *searchindex.TextIndex, keywords []string) ([][]byte, error) {
	var out [][]byte
	err := staleTexts(ctx, c, r, ti, v.StaleKeys(), keywords, func(key []byte, terms []fulltext.Term, kws [][]fulltext.Term) {
		for _, kw := range kws {
			if len(kw) > 0 && fulltext.Occurrences(terms, kw) > 0 {
				out = append(out, key)
				break
			}
		}
	})
	return out, err
}

// staleTexts hands fn each stale item (by its key suffix) that r holds
// with a text at ti's path: its key, the text's terms as ti's analyzer
// makes them (the text the index would hold for the item, expired items
// included), and the keywords' terms.
func staleTexts(ctx context.Context, c *Container, r storage.Reader, ti *searchindex.TextIndex, suffixes [][]byte, keywords []string, fn func(key []byte, terms []fulltext.Term, kws [][]fulltext.Term)) error {
	if len(suffixes) == 0 {
		return nil
	}
	an := ti.Index.Analyzer()
	kws := make([][]fulltext.Term, len(keywords))
	for i, k := range keywords {
		kws[i] = an.Analyze(k)
	}
	itemKeys := make([][]byte, len(suffixes))
	for i, s := range suffixes {
		itemKeys[i] = keys.ItemKeyFromSuffix(c.rid, s)
	}
	values, err := storage.GetMany(ctx, r, itemKeys)
	if err != nil {
		return err
	}
	for i, raw := range values {
		if raw == nil {
			continue
		}
		s, err := decodeItem(itemKeys[i], raw)
		if err != nil {
			return err
		}
		var text string
		if raw := searchindex.RawAt(s.doc, ti.Segments()); raw == nil || json.Unmarshal(raw, &text) != nil {
			continue
		}
		fn(itemKeys[i], an.Analyze(text), kws)
	}
	return nil
}
