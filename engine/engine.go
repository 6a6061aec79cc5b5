package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/storage"
)

// lockStripes is how many mutexes serialize the writers of logical
// partitions; two partitions rarely share one.
const lockStripes = 4096

// Options configure an Engine.
type Options struct {
	// Now is the clock; time.Now when nil. Tests set it to move time.
	Now func() time.Time
	// ServeCrossPartitionQueries executes cross-partition queries that the
	// service's gateway refuses without a client-side query plan (ORDER BY,
	// aggregates, DISTINCT, GROUP BY, TOP, OFFSET/LIMIT from clients such as
	// the Go SDK). Off by default, so code that passes against Orrery passes
	// against Azure; on for teams that use Orrery as their database.
	ServeCrossPartitionQueries bool
	// PartitionKeyRanges is how many partition key ranges a new container
	// gets at least; a container created with more throughput gets one per
	// 10,000 RU/s, as in the service. Zero means one.
	PartitionKeyRanges int
	// ScriptLimits bound every stored procedure, trigger and UDF run (time
	// budget, memory ceiling, call depth); zero fields take the defaults.
	ScriptLimits script.Limits
	// MaxConcurrentScripts bounds how many stored procedures and triggers run
	// at once for their whole time budget, so runaway scripts cannot take
	// every core from the requests that run none; zero means half the cores
	// (at least one). As many again may run for a short quantum, for the
	// partitions that hold no slot when all are taken; one logical partition
	// holds at most half the slots (at least one), and waiting partitions
	// get free slots in turn (see scriptGate). A script that finds no free
	// slot within its time budget is answered 429.
	MaxConcurrentScripts int
	// SweepInterval is how often expired items are deleted for real;
	// DefaultSweepInterval when zero, never when negative (expired items
	// stay hidden from reads, queries and feeds all the same).
	SweepInterval time.Duration
	// QueryTimeBudget is how long one page of a query may run (wall time),
	// DefaultQueryTimeBudget when zero, unbounded when negative. A streaming
	// query's page ends early with a continuation when it is spent; a query
	// evaluated whole (ORDER BY, aggregates, GROUP BY, DISTINCT), or one
	// whose first row alone takes longer, is answered 408.
	QueryTimeBudget time.Duration
	// QueryMemoryLimit is how many bytes one query may hold while it runs
	// (kept rows, groups, sort buffers, results), DefaultQueryMemoryLimit
	// when zero, unbounded when negative. A query that needs more is
	// answered 400 with a message saying so.
	QueryMemoryLimit int64
	// QueryMemoryPool is how many bytes all running queries may hold
	// together, DefaultQueryMemoryPool when zero, unbounded when negative. A
	// query that finds it taken by others is answered 429.
	QueryMemoryPool int64
	// MaxCostlyQueries bounds how many costly queries (past query.HeavyAfter
	// units of work in a page) run at once, so that runaway queries leave
	// cores to point reads and cheap queries; zero means half the cores (at
	// least one), negative no bound. A costly query waits for a slot within
	// its page's time budget and is answered 429 if none frees up.
	MaxCostlyQueries int
	// Logger receives the engine's logs (progress of long work: index
	// rebuilds, TTL sweeps); slog.Default() when nil.
	Logger *slog.Logger
}

// DefaultSweepInterval is how often the TTL sweeper looks for expired items
// when Options.SweepInterval is zero.
const DefaultSweepInterval = time.Second

// Defaults of the query limits (see Options).
const (
	// DefaultQueryTimeBudget is the time one page of a query may run, the
	// service's per-page execution limit.
	DefaultQueryTimeBudget = 5 * time.Second
	// DefaultQueryMemoryLimit is the memory one query may hold.
	DefaultQueryMemoryLimit = 128 << 20
	// DefaultQueryMemoryPool is the memory all running queries may hold.
	DefaultQueryMemoryPool = 512 << 20
)

// Engine is one Cosmos account's databases on one storage.Store.
// It is safe for concurrent use.
type Engine struct {
	store   storage.Store
	opts    Options
	seq     lsnSource
	seam    seam
	durable *durability
	// scripts runs stored procedures, triggers and UDFs (scriptexec.go).
	scripts *scriptHost
	// items runs item writes alone and in batches (operation.go).
	items itemWriter
	// feedReads holds, by container RID, the furthest position a
	// change-feed read was answered up to (*atomic.Uint64; Stats).
	feedReads feedReads
	log       *slog.Logger
	now       func() time.Time
	// queries runs the queries (queryrunner.go).
	queries *queryRunner

	// shared is set when the store is a storage.Shared (see shared.go).
	shared *sharedState

	// catalog is the catalog cache (catalog.go): catMu, dbs, offers,
	// their lookups and changes are the catalog's. Its store, seam, LSN
	// source and clock are this engine's.
	catalog

	// presence holds each container's presence filter (presence.go).
	presence presenceFilters
	locks    [lockStripes]sync.Mutex

	bg sync.WaitGroup
	// rebuilder builds indexes again from the items (rebuild.go).
	rebuilder rebuilder
	// sweeper is the TTL sweep (ttl.go).
	sweeper   *sweeper
	stop      stopSignal
	closeOnce sync.Once
	// bgCtx is the context of background work (the TTL sweep, purges of
	// deleted containers, presence builds, index rebuilds a request
	// started): no client's cancel ends it, Close does.
	bgCtx    context.Context
	cancelBg context.CancelFunc

	// search holds the containers' open search indexes (searchindex.go).
	search searchIndexes
	// purger deletes what a dropped container leaves (containerpurge.go).
	purger containerPurger
}

// Close stops the TTL sweeper and waits for background work (sweeping,
// purging deleted containers) to finish.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		close(e.stop)
		e.cancelBg()
	})
	e.bg.Wait()
	return nil
}

// ScriptStats is how many stored procedures and triggers run and wait for a
// slot at one moment.
type ScriptStats struct {
	Running int
	Waiting int
}

// ScriptStats reports how many stored procedures and triggers run and wait
// for a slot now, for metrics and tests.
func (e *Engine) ScriptStats() ScriptStats {
	running, waiting := e.scripts.stats()
	return ScriptStats{Running: running, Waiting: waiting}
}

// SessionLSN is the sequence number every committed write is at or below:
// the global LSN of session tokens. It fails when the store cannot tell
// (a shared store it cannot reach: storage.ErrUnavailable).
func (e *Engine) SessionLSN(ctx context.Context) (uint64, error) { return e.seq.watermark(ctx) }
