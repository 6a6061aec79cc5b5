package engine

import (
	"context"
	"hash/maphash"
	"log/slog"
	"runtime"
	"time"

	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// Open: the one place the engine is put together. It upgrades an older
// store's layout, picks the seam (a store of this process alone, or one
// shared with other engines), loads the catalog and offers, upgrades the
// indexes and starts the background duties. Nothing in the package calls
// it back.

// Open loads the catalog from store and returns a ready engine. The caller
// keeps ownership of store and closes it after Close. ctx bounds the loading
// (and an index upgrade it runs) only: the engine's background work runs
// under a context of its own, which Close cancels.
//
// Every other method that reads or writes takes the request's context
// first: once it ends, the store stops waiting for the request's reads and
// writes and the request fails with an error wrapping the context's
// (answered 408). A write whose commit had begun may have committed.
func Open(ctx context.Context, store storage.Store, opts Options) (*Engine, error) {
	format, err := upgradeLayout(ctx, store)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		store:   store,
		opts:    opts,
		durable: newDurability(),
		now:     opts.Now,
		catalog: catalog{store: store, dbs: map[string]*Database{}, offers: map[string][]byte{}},
		stop:    make(stopSignal),
	}
	e.bgCtx, e.cancelBg = context.WithCancel(context.Background())
	if e.now == nil {
		e.now = time.Now
	}
	if e.log = opts.Logger; e.log == nil {
		e.log = slog.Default()
	}
	// The TTL sweeper runs through the seam, and the seam runs it: it gets
	// its seam below, once chosen.
	e.sweeper = &sweeper{store: store, catalog: &e.catalog, log: e.log, now: e.now, stop: e.stop, ctx: e.bgCtx, bg: &e.bg}
	// The seam is chosen once, here: a store this process has alone, or
	// one it shares with other engines.
	if shared, ok := store.(storage.Shared); ok {
		e.shared = newSharedState(shared)
		v, err := catalogVersion(ctx, store)
		if err != nil {
			return nil, err
		}
		e.shared.version.Store(&v)
		sh := &sharedSeam{store: store, state: e.shared, catalog: &e.catalog, search: &e.search, log: e.log, now: e.now,
			sweeper: e.sweeper, stop: e.stop, ctx: e.bgCtx, bg: &e.bg}
		e.seam, e.seq = sh, e.shared
	} else {
		seq, err := newSequencer(ctx, store)
		if err != nil {
			return nil, err
		}
		local := &localSeam{store: store, catalog: &e.catalog, seq: seq, durable: e.durable, now: e.now,
			presence: &e.presence, search: &e.search, sweeper: e.sweeper, locks: e.locks[:], seed: maphash.MakeSeed()}
		e.seam, e.seq = local, seq
	}
	e.catMu.seam, e.catalog.seam, e.catalog.lsns, e.catalog.now = e.seam, e.seam, e.seq, e.now
	e.sweeper.seam = e.seam
	e.presence = presenceFilters{store: store, locks: e.locks[:], stop: e.stop, ctx: e.bgCtx, bg: &e.bg}
	e.rebuilder = rebuilder{store: store, catalog: &e.catalog, seam: e.seam, log: e.log, locks: e.locks[:]}
	e.search = newSearchIndexes(e.bgCtx, &e.bg, store, e.log, e.now, func(c *Container) (*Container, error) { return e.successor(e.bgCtx, c) })
	e.purger = containerPurger{store: store, log: e.log, presence: &e.presence, feedReads: &e.feedReads, search: &e.search, ctx: e.bgCtx, bg: &e.bg}
	e.scripts = &scriptHost{limits: opts.ScriptLimits, maxConcurrent: opts.MaxConcurrentScripts, seam: e.seam}
	e.items = itemWriter{seam: e.seam, scripts: e.scripts}
	e.queries = &queryRunner{store: store, seam: e.seam, search: &e.search, durable: e.durable, now: e.now,
		udfs: udfRuntime{read: func(ctx context.Context, c *Container, id string) (script.UDF, error) {
			props, _, err := readScript(ctx, store, c, UserFunctions, id)
			return scriptOf(props), err
		}, runner: e.scripts.runner, runs: &e.scripts.runs},
		cursors: newCursorCache(e.now), budget: opts.QueryTimeBudget, maxMemory: opts.QueryMemoryLimit,
		serveCrossPartition: opts.ServeCrossPartitionQueries}
	if e.queries.budget == 0 {
		e.queries.budget = DefaultQueryTimeBudget
	}
	if e.queries.maxMemory == 0 {
		e.queries.maxMemory = DefaultQueryMemoryLimit
	}
	e.scripts.queries = procedureQueries{e.queries}
	if n := opts.MaxCostlyQueries; n >= 0 {
		if n == 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		e.queries.costlySlots = make(chan struct{}, n)
	}
	switch {
	case opts.QueryMemoryPool == 0:
		e.queries.pool = query.NewMemoryPool(DefaultQueryMemoryPool)
	case opts.QueryMemoryPool > 0:
		e.queries.pool = query.NewMemoryPool(opts.QueryMemoryPool)
	}
	if err := e.loadCatalog(ctx); err != nil {
		return nil, err
	}
	if err := e.loadOffers(ctx); err != nil {
		return nil, err
	}
	if err := e.ensureContainerOffers(ctx); err != nil {
		return nil, err
	}
	if err := e.rebuilder.upgradeIndexes(ctx); err != nil {
		return nil, err
	}
	if err := e.rebuilder.upgradeExpiry(ctx, format); err != nil {
		return nil, err
	}
	interval := opts.SweepInterval
	if interval == 0 {
		interval = DefaultSweepInterval
	}
	if interval > 0 {
		e.bg.Add(1)
		go e.seam.sweepLoop(interval)
	}
	return e, nil
}
