package changefeed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Batch is one page of changes from one lease's range, in the order the
// change feed gives them (modification order within a logical partition).
type Batch struct {
	// LeaseToken names the lease (and range) the changes come from.
	LeaseToken string
	// Range is the lease's feed range.
	Range azcosmos.FeedRange
	// Changes are the changed items' JSON, latest version.
	Changes [][]byte
}

// Handler handles a batch. When it returns nil the lease is checkpointed
// past the batch; on an error the batch is delivered again after a backoff.
// A batch may be delivered more than once (at least once), for example when
// a lease moves to another instance between handling and checkpoint. The
// batches of one lease come one at a time; different leases' batches come
// concurrently, so a Handler must be safe for concurrent use.
type Handler func(ctx context.Context, b Batch) error

// StartFrom says where a lease with no checkpoint starts reading.
type StartFrom struct {
	now bool
	at  time.Time
}

// StartFromBeginning reads every change the container still has.
func StartFromBeginning() StartFrom { return StartFrom{} }

// StartFromNow reads changes made after the leases were created.
func StartFromNow() StartFrom { return StartFrom{now: true} }

// StartFromTime reads changes made at or after t (one-second resolution).
func StartFromTime(t time.Time) StartFrom { return StartFrom{at: t} }

// Options configure a processor. Zero values take the .NET processor's
// defaults.
type Options struct {
	// Name is the processor name, the first part of every lease id; every
	// instance of one processor uses the same name.
	Name string
	// Host is the account endpoint's host as the client was configured
	// with, part of the lease prefix as in the .NET processor, so .NET and
	// Go instances of one processor share leases.
	Host string
	// Instance names this instance in lease Owner fields; default the host
	// name, process id and a random suffix.
	Instance string
	// StartFrom applies to leases that have no checkpoint.
	StartFrom StartFrom
	// MaxItems is the page size of feed reads; default 100.
	MaxItems int32
	// PollInterval is the wait after a read found nothing new; default 5 s.
	PollInterval time.Duration
	// AcquireInterval is how often leases are balanced; default 13 s.
	AcquireInterval time.Duration
	// RenewInterval is how often held leases are renewed; default 17 s.
	RenewInterval time.Duration
	// Expiration is how long a lease may go unrenewed before another
	// instance takes it; default 60 s.
	Expiration time.Duration
	// Metrics, when set, receive the processor's measures; LagInterval
	// (default 30 s) is then how often the lag of held leases is estimated.
	Metrics     *Metrics
	LagInterval time.Duration
	// OnError, when set, is told of the errors the processor recovers from
	// by retrying: failed lease listings and acquisitions (lease ""),
	// failed reads, handler errors and failed checkpoints (lease token).
	// It is called concurrently.
	OnError func(lease string, err error)
}

func (o *Options) defaults() {
	if o.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.MaxItems <= 0 {
		o.MaxItems = 100
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PollInterval, 5*time.Second)
	def(&o.AcquireInterval, 13*time.Second)
	def(&o.RenewInterval, 17*time.Second)
	def(&o.Expiration, 60*time.Second)
	def(&o.LagInterval, 30*time.Second)
}

// Processor delivers a container's change feed to a Handler, sharing the
// work among every instance with the same Name through leases.
type Processor struct {
	monitored *azcosmos.ContainerClient
	leases    *azcosmos.ContainerClient
	handler   Handler
	opts      Options

	st  *store
	rid string

	mu     sync.Mutex
	owned  map[string]*partition
	seen   map[string]sighting
	killed atomic.Bool
	wg     sync.WaitGroup
	runCtx context.Context
}

// sighting is when this instance first saw a lease at an ETag: a lease whose
// ETag has not moved for Expiration by this instance's own clock is expired,
// whatever the owner's clock says.
type sighting struct {
	etag azcore.ETag
	at   time.Time
}

// partition is a lease this instance holds and the goroutine reading it.
type partition struct {
	mu     sync.Mutex // serializes writes to the lease
	lease  *Lease
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a processor of monitored's change feed keeping its leases in
// leases, a container partitioned by /id (as the .NET and Java processors
// require for a shared lease container) or by /partitionKey.
func New(monitored, leases *azcosmos.ContainerClient, handler Handler, opts Options) *Processor {
	opts.defaults()
	return &Processor{monitored: monitored, leases: leases, handler: handler, opts: opts,
		owned: map[string]*partition{}, seen: map[string]sighting{}}
}

// Instance is the name this instance writes in the leases it owns.
func (p *Processor) Instance() string { return p.opts.Instance }

// init reads the monitored container and creates the leases if the store is
// new.
func (p *Processor) init(ctx context.Context) error {
	if p.st != nil {
		return nil
	}
	props, err := p.monitored.Read(ctx, nil)
	if err != nil {
		return fmt.Errorf("changefeed: reading the monitored container: %w", err)
	}
	p.rid = props.ContainerProperties.ResourceID
	p.st = &store{c: p.leases, prefix: leasePrefix(p.opts.Name, p.opts.Host, p.rid)}
	return bootstrap(ctx, p.st, p.monitored, p.rid, p.opts.StartFrom, p.opts.PollInterval)
}

// Run processes the feed until ctx ends, then releases the leases it holds
// and returns ctx's error (or the error that stopped it).
func (p *Processor) Run(ctx context.Context) error {
	if err := p.init(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.runCtx = runCtx
	go func() {
		<-ctx.Done()
		cancel()
	}()
	if p.opts.Metrics != nil {
		p.wg.Add(1)
		go p.lagLoop(runCtx)
	}
	for {
		if err := p.balanceOnce(runCtx); err != nil && runCtx.Err() == nil {
			p.report("", err) // the next round retries
		}
		select {
		case <-runCtx.Done():
			p.stopAll()
			return ctx.Err()
		case <-time.After(p.opts.AcquireInterval):
		}
	}
}

// stopAll stops every partition and releases its lease (unless killed).
func (p *Processor) stopAll() {
	p.mu.Lock()
	parts := make([]*partition, 0, len(p.owned))
	for _, pt := range p.owned {
		parts = append(parts, pt)
	}
	p.mu.Unlock()
	for _, pt := range parts {
		pt.cancel()
	}
	for _, pt := range parts {
		<-pt.done
	}
	p.wg.Wait()
	if p.killed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pt := range parts {
		pt.mu.Lock()
		_, _ = p.st.update(ctx, pt.lease, p.mine, func(l *Lease) { l.Owner = "" })
		pt.mu.Unlock()
	}
	p.mu.Lock()
	p.owned = map[string]*partition{}
	p.mu.Unlock()
	p.setOwnedGauge()
}

// kill makes the next stop leave the leases held, as a crashed instance
// would; for tests.
func (p *Processor) kill() { p.killed.Store(true) }

func (p *Processor) mine(l *Lease) bool { return l.Owner == p.opts.Instance }

// expired reports whether a lease's owner has gone: released, not written
// for Expiration by its own timestamp (the .NET rule), or its ETag unchanged
// for Expiration by this instance's clock.
func (p *Processor) expired(l *Lease, now time.Time) bool {
	if l.Owner == "" {
		return true
	}
	if l.Owner == p.opts.Instance {
		return false
	}
	if !l.Timestamp.IsZero() && l.Timestamp.Add(p.opts.Expiration).Before(now) {
		return true
	}
	s, ok := p.seen[l.ID]
	return ok && s.etag == l.ETag && now.Sub(s.at) >= p.opts.Expiration
}

// balanceOnce lists the leases, restarts the ones this instance owns but
// does not run, and acquires what the balancing strategy says.
func (p *Processor) balanceOnce(ctx context.Context) error {
	all, err := p.st.list(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	p.mu.Lock()
	ids := map[string]bool{}
	for _, l := range all {
		ids[l.ID] = true
		if s, ok := p.seen[l.ID]; !ok || s.etag != l.ETag {
			p.seen[l.ID] = sighting{etag: l.ETag, at: now}
		}
	}
	for id := range p.seen {
		if !ids[id] {
			delete(p.seen, id)
		}
	}
	for id, pt := range p.owned {
		select {
		case <-pt.done:
			delete(p.owned, id)
		default:
		}
	}
	var view []*Lease
	for _, l := range all {
		c := *l
		// A lease this instance owns in the store but does not run (its
		// goroutine ended, or the instance restarted) is free to it.
		if p.mine(&c) && p.owned[c.ID] == nil {
			c.Owner = ""
		}
		view = append(view, &c)
	}
	take := balance(view, p.opts.Instance, func(l *Lease) bool { return p.expired(l, now) })
	p.mu.Unlock()
	for _, l := range take {
		listed := *l
		for _, orig := range all {
			if orig.ID == l.ID {
				listed = *orig
			}
		}
		got, err := p.st.update(ctx, &listed,
			func(s *Lease) bool { return s.Owner == listed.Owner || s.Owner == "" || s.Owner == p.opts.Instance },
			func(s *Lease) { s.Owner = p.opts.Instance })
		if err != nil {
			if !errors.Is(err, ErrLeaseLost) {
				p.report("", err)
			}
			continue
		}
		p.start(ctx, got)
	}
	p.setOwnedGauge()
	return nil
}

func (p *Processor) setOwnedGauge() {
	if p.opts.Metrics == nil {
		return
	}
	p.mu.Lock()
	n := len(p.owned)
	p.mu.Unlock()
	p.opts.Metrics.leasesOwned.WithLabelValues(p.opts.Name).Set(float64(n))
}

// start runs a partition for a lease this instance now holds.
func (p *Processor) start(ctx context.Context, l *Lease) {
	pctx, cancel := context.WithCancel(ctx)
	pt := &partition{lease: l, cancel: cancel, done: make(chan struct{})}
	p.mu.Lock()
	if old := p.owned[l.ID]; old != nil {
		p.mu.Unlock()
		cancel()
		return
	}
	p.owned[l.ID] = pt
	p.mu.Unlock()
	go func() {
		defer close(pt.done)
		defer cancel()
		go p.renewLoop(pctx, pt)
		p.process(pctx, pt)
	}()
}

// renewLoop renews the lease every RenewInterval; losing it stops the
// partition.
func (p *Processor) renewLoop(ctx context.Context, pt *partition) {
	t := time.NewTicker(p.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.write(ctx, pt, func(*Lease) {}); errors.Is(err, ErrLeaseLost) {
			pt.cancel()
			return
		}
	}
}

// write applies mutate to the held lease if this instance still owns it.
func (p *Processor) write(ctx context.Context, pt *partition, mutate func(*Lease)) error {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if p.killed.Load() {
		return ErrLeaseLost
	}
	got, err := p.st.update(ctx, pt.lease, p.mine, mutate)
	if err != nil {
		return err
	}
	pt.lease = got
	return nil
}

func (pt *partition) snapshot() Lease {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return *pt.lease
}

// feedOptions are the read options for a lease at continuation cont.
func feedOptions(rid string, r azcosmos.FeedRange, cont string, from StartFrom, maxItems int32) *azcosmos.ChangeFeedOptions {
	o := &azcosmos.ChangeFeedOptions{MaxItemCount: maxItems, FeedRange: &r}
	switch {
	case cont != "":
		t := encodeToken(rid, r, cont)
		o.Continuation = &t
	case from.now:
		t := encodeToken(rid, r, "*")
		o.Continuation = &t
	case !from.at.IsZero():
		at := from.at
		o.StartFrom = &at
	}
	return o
}

// process reads the lease's range, hands batches to the handler and
// checkpoints after each, until the lease is lost, splits, or ctx ends.
func (p *Processor) process(ctx context.Context, pt *partition) {
	failures := 0
	for ctx.Err() == nil {
		l := pt.snapshot()
		r, ok := l.Range()
		if !ok {
			// A version-0 lease written without its range: nothing to read.
			return
		}
		resp, err := p.monitored.ReadChangeFeed(ctx, feedOptions(p.rid, r, l.ContinuationToken, p.opts.StartFrom, p.opts.MaxItems))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.report(l.LeaseToken, err)
			if statusOf(err) == http.StatusGone || errors.Is(err, azcosmos.ErrFeedRangeUnresolved) {
				if done := p.splitFromService(ctx, pt, l, r); done {
					return
				}
			}
			failures++
			p.backoff(ctx, failures)
			continue
		}
		tok, _ := decodeToken(resp.ContinuationToken)
		if len(resp.Items) > 0 {
			if err := p.handler(ctx, Batch{LeaseToken: l.LeaseToken, Range: r, Changes: resp.Items}); err != nil {
				p.report(l.LeaseToken, fmt.Errorf("changefeed: handler: %w", err))
				if m := p.opts.Metrics; m != nil {
					m.failedBatches.WithLabelValues(p.opts.Name).Inc()
				}
				failures++
				p.backoff(ctx, failures)
				continue
			}
		}
		failures = 0
		if children := splitFromToken(r, l.ContinuationToken, tok); children != nil {
			err := p.split(ctx, pt, children)
			if err == nil {
				p.countBatch(len(resp.Items))
				return
			}
			if errors.Is(err, ErrLeaseLost) {
				return
			}
			p.report(l.LeaseToken, err)
			continue
		}
		next := ""
		if len(tok.Continuation) == 1 && tok.Continuation[0].Token != nil {
			next = *tok.Continuation[0].Token
		}
		if next != "" && next != l.ContinuationToken {
			// A handled batch is checkpointed even when the processor is
			// stopping, so a graceful stop does not redeliver it.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := p.write(cctx, pt, func(s *Lease) { s.ContinuationToken = next })
			cancel()
			if err != nil {
				if errors.Is(err, ErrLeaseLost) {
					return
				}
				p.report(l.LeaseToken, err)
				continue
			}
		}
		p.countBatch(len(resp.Items))
		if len(resp.Items) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(p.opts.PollInterval):
			}
		}
	}
}

func (p *Processor) report(lease string, err error) {
	if p.opts.OnError != nil {
		p.opts.OnError(lease, err)
	}
}

func (p *Processor) countBatch(n int) {
	if m := p.opts.Metrics; m != nil && n > 0 {
		m.handledBatches.WithLabelValues(p.opts.Name).Inc()
		m.changes.WithLabelValues(p.opts.Name).Add(float64(n))
	}
}

// backoff waits before retrying a failed read or batch: exponential from
// 100 ms, capped at PollInterval (at least one second).
func (p *Processor) backoff(ctx context.Context, failures int) {
	d := time.Duration(float64(100*time.Millisecond) * math.Pow(2, float64(min(failures, 10)-1)))
	d = min(d, max(p.opts.PollInterval, time.Second))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// splitFromService handles a 410 (partition key range gone) the SDK could
// not resolve itself: it re-reads the container's feed ranges and, when the
// lease's range is now several, replaces the lease by its children, each
// resuming from the parent's continuation. It reports whether the lease was
// replaced.
func (p *Processor) splitFromService(ctx context.Context, pt *partition, l Lease, r azcosmos.FeedRange) bool {
	ranges, err := p.monitored.ReadFeedRanges(ctx, nil)
	if err != nil {
		return false
	}
	children := splitFromRanges(r, l.ContinuationToken, ranges)
	if children == nil {
		return false
	}
	return p.split(ctx, pt, children) == nil
}

// split replaces the held lease by leases for its children: it confirms
// ownership (a renewal), creates each child (create-only: a child already
// made by an earlier attempt keeps its own position), owned by this
// instance, then deletes the parent with If-Match, and starts the children.
// A crash before the delete leaves the parent, which the next owner splits
// again; changes are then delivered again, never skipped.
func (p *Processor) split(ctx context.Context, pt *partition, children []childRange) error {
	if err := p.write(ctx, pt, func(*Lease) {}); err != nil {
		return err
	}
	parent := pt.snapshot()
	var made []*Lease
	for _, c := range children {
		child := p.st.newLease(c.Range, c.Continuation, p.opts.Instance, parent.Properties)
		created, err := p.st.create(ctx, child)
		if err != nil {
			return err
		}
		if created {
			made = append(made, child)
		}
	}
	pt.mu.Lock()
	err := p.st.remove(ctx, pt.lease)
	pt.mu.Unlock()
	if err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.owned, parent.ID)
	p.mu.Unlock()
	for _, c := range made {
		p.start(p.runCtx, c)
	}
	return nil
}

// lagLoop publishes the estimated lag of the held leases.
func (p *Processor) lagLoop(ctx context.Context) {
	defer p.wg.Done()
	est := &Estimator{monitored: p.monitored, st: p.st, rid: p.rid, from: p.opts.StartFrom}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.opts.LagInterval):
		}
		p.mu.Lock()
		var held []Lease
		for _, pt := range p.owned {
			held = append(held, pt.snapshot())
		}
		p.mu.Unlock()
		for _, l := range held {
			n, err := est.leaseLag(ctx, &l)
			if err == nil {
				p.opts.Metrics.lag.WithLabelValues(p.opts.Name, l.LeaseToken).Set(float64(n))
			}
		}
	}
}

// bootstrap creates the leases of a new store, one per feed range, under the
// store's lock document, then marks the store initialized (.info), as the
// .NET and Java processors do.
func bootstrap(ctx context.Context, st *store, monitored *azcosmos.ContainerClient, rid string, from StartFrom, poll time.Duration) error {
	info, lock := st.prefix+".info", st.prefix+".lock"
	for {
		if _, err := st.c.ReadItem(ctx, st.pk(info), info, nil); err == nil {
			return nil
		} else if statusOf(err) != http.StatusNotFound {
			return fmt.Errorf("changefeed: reading the lease store: %w", err)
		}
		lockDoc, _ := json.Marshal(map[string]any{"id": lock, "partitionKey": lock, "ttl": 30})
		resp, err := st.c.CreateItem(ctx, st.pk(lock), lockDoc, nil)
		if statusOf(err) == http.StatusConflict {
			// Another instance is initializing; a lock older than its TTL is
			// from a crashed one (in a container without TTL) and is removed.
			if cur, rerr := st.c.ReadItem(ctx, st.pk(lock), lock, nil); rerr == nil {
				var d struct {
					TS int64 `json:"_ts"`
				}
				if json.Unmarshal(cur.Value, &d) == nil && time.Since(time.Unix(d.TS, 0)) > 30*time.Second {
					_, _ = st.c.DeleteItem(ctx, st.pk(lock), lock, &azcosmos.ItemOptions{IfMatchEtag: &cur.ETag})
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(poll, time.Second)):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("changefeed: locking the lease store: %w", err)
		}
		lockETag := resp.ETag
		if err := createLeases(ctx, st, monitored, rid, from); err != nil {
			return err
		}
		infoDoc, _ := json.Marshal(map[string]any{"id": info, "partitionKey": info})
		if _, err := st.c.CreateItem(ctx, st.pk(info), infoDoc, nil); err != nil && statusOf(err) != http.StatusConflict {
			return fmt.Errorf("changefeed: initializing the lease store: %w", err)
		}
		_, _ = st.c.DeleteItem(ctx, st.pk(lock), lock, &azcosmos.ItemOptions{IfMatchEtag: &lockETag})
		return nil
	}
}

// createLeases creates a lease for every feed range no lease covers yet.
// With StartFromNow the current position is read and stored, so "now" is
// when the processor was first started, not when a lease is first read.
func createLeases(ctx context.Context, st *store, monitored *azcosmos.ContainerClient, rid string, from StartFrom) error {
	ranges, err := monitored.ReadFeedRanges(ctx, nil)
	if err != nil {
		return fmt.Errorf("changefeed: reading feed ranges: %w", err)
	}
	existing, err := st.list(ctx)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		covered := false
		for _, l := range existing {
			if lr, ok := l.Range(); ok && (lr.MinInclusive == r.MinInclusive || normMax(lr.MaxExclusive) == normMax(r.MaxExclusive)) {
				covered = true
			}
		}
		if covered {
			continue
		}
		cont := ""
		if from.now {
			resp, err := monitored.ReadChangeFeed(ctx, feedOptions(rid, r, "", from, 1))
			if err != nil {
				return fmt.Errorf("changefeed: reading the current position: %w", err)
			}
			if t, ok := decodeToken(resp.ContinuationToken); ok && len(t.Continuation) == 1 && t.Continuation[0].Token != nil {
				cont = *t.Continuation[0].Token
			}
		}
		if _, err := st.create(ctx, st.newLease(r, cont, "", nil)); err != nil {
			return err
		}
	}
	return nil
}
