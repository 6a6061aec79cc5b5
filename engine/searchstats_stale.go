package engine

import (
	"context"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
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
	// The expired items are counted too: withoutUnswept takes those off
	// after.
	err = staleTexts(ctx, c, r, t, stale, keywords, func(_ []byte, terms []fulltext.Term, kws [][]fulltext.Term) {
		st.Documents++
		st.Words += int64(len(terms))
		for j, kw := range kws {
			if len(kw) > 0 && fulltext.Occurrences(terms, kw) > 0 {
				st.Hits[j]++
			}
		}
	})
	if err != nil {
		return query.FullTextStats{}, err
	}
	return st, nil
}
