package engine

import (
	"context"
	"encoding/json"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// staleTextStats returns a full-text index's BM25 statistics as the query's
// snapshot r has them when some items are stale in the index (on a shared
// store, the gateway's index caught up past the snapshot by another query):
// the counters without the index's state of those items
// (fulltext.Index.StatsExcept), with their texts as r has them counted
// instead, so that a query with stale items reads the stale items, not the
// whole container.
func (s *searchIndexes) staleTextStats(ctx context.Context, c *Container, r storage.Reader, t *searchindex.TextIndex, stale [][]byte, keywords []string) (query.FullTextStats, error) {
	counts, err := t.Index.StatsExcept(ctx, t.State(s.store), keywords, stale)
	if err != nil {
		return query.FullTextStats{}, err
	}
	st := query.FullTextStats{Documents: counts.Documents, Words: counts.Words, Hits: counts.Hits}
	if len(stale) == 0 {
		return st, nil
	}
	an := t.Index.Analyzer()
	kws := make([][]fulltext.Term, len(keywords))
	for i, k := range keywords {
		kws[i] = an.Analyze(k)
	}
	itemKeys := make([][]byte, len(stale))
	for i, sfx := range stale {
		itemKeys[i] = keys.ItemKeyFromSuffix(c.rid, sfx)
	}
	values, err := storage.GetMany(ctx, r, itemKeys)
	if err != nil {
		return query.FullTextStats{}, err
	}
	for i, v := range values {
		if v == nil {
			continue
		}
		it, err := decodeItem(itemKeys[i], v)
		if err != nil {
			return query.FullTextStats{}, err
		}
		// The text the index would hold for the item (searchindex's Write), the
		// expired items included: withoutUnswept takes those off after.
		var text string
		if raw := searchindex.RawAt(it.doc, t.Segments()); raw == nil || json.Unmarshal(raw, &text) != nil {
			continue
		}
		terms := an.Analyze(text)
		st.Documents++
		st.Words += int64(len(terms))
		for j, kw := range kws {
			if len(kw) > 0 && fulltext.Occurrences(terms, kw) > 0 {
				st.Hits[j]++
			}
		}
	}
	return st, nil
}
