package engine

import (
	"context"

	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// sourceDocs is wholeQuery's documents: the source's, live at now, in
// creation order when ordered (else in key order).
func sourceDocs(ctx context.Context, c *Container, snap storage.Reader, src source, now int64, ordered bool) query.Docs {
	candidates := c.scan(ctx, snap, src, nil, now)
	if src.index != nil && ordered {
		byCreation, ok, err := c.creationOrdered(ctx, snap, src, nil, now)
		if err != nil {
			return func(yield func([]byte, error) bool) { yield(nil, err) }
		}
		if ok {
			return func(yield func([]byte, error) bool) {
				for _, cand := range byCreation {
					if !yield(cand.item.doc, nil) {
						return
					}
				}
			}
		}
	}
	return func(yield func([]byte, error) bool) {
		for cand, err := range candidates {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(cand.item.doc, nil) {
				return
			}
		}
	}
}
