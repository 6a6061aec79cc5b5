package engine

import (
	"context"
	"log/slog"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// containerPurger deletes what a dropped container leaves in the store and
// in memory. It holds the parts that keep something of a container (its
// presence filter, its change-feed read positions, its search indexes) and
// the engine's background context, not the engine.
type containerPurger struct {
	store     storage.Store
	log       *slog.Logger
	presence  *presenceFilters
	feedReads *feedReads
	search    *searchIndexes
	// ctx and bg are the engine's background work's: Close waits for a
	// purge.
	ctx context.Context
	bg  *sync.WaitGroup
}

// purge deletes a dropped container's items, feeds and indexes in the
// background, in chunks, so a large container does not stall the catalog.
// Its RID is never reused, so the leftovers are unreachable meanwhile.
func (p containerPurger) purge(collRID []byte) {
	p.presence.drop(collRID)
	p.feedReads.Delete(string(collRID))
	p.search.drop(collRID)
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		// A purge runs to its end, Close waiting for it: cut short, its
		// leftovers would stay unreachable for good.
		ctx := context.WithoutCancel(p.ctx)
		for _, prefix := range [][]byte{keys.ItemContainerPrefix(collRID), keys.FeedPrefix(collRID), keys.RIDPrefix(collRID),
			keys.VersionPrefix(collRID), keys.ExpiryPrefix(collRID), keys.IndexPrefix(collRID), keys.UniquePrefix(collRID), keys.IndexRebuild(collRID), keys.ExpiryRebuild(collRID), keys.OrderPrefix(collRID), keys.SearchPrefix(collRID)} {
			if err := purgePrefix(ctx, p.store, prefix); err != nil {
				p.log.Warn("purging a deleted container's data failed", "error", err)
				return
			}
		}
	}()
}
