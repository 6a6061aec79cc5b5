package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/status"
)

// Batch is one page of changes from one lease's range, in the order the
// change feed gives them (modification order within a logical partition).
type Batch struct {
	// LeaseToken names the lease (and range) the changes come from.
	LeaseToken string
	// Range is the lease's feed range.
	Range azcosmos.FeedRange
	// Changes are the changes' JSON: in LatestVersion mode each changed
	// item's latest version; in AllVersionsAndDeletes mode one record per
	// change, which Versions decodes.
	Changes [][]byte

	checkpoint func(context.Context) error
}

// Checkpoint records the end of this batch as its lease's position, so a
// restart or another instance resumes after it. With
// Options.ManualCheckpoint it is the only way a lease advances; otherwise
// the processor checkpoints each batch once the handler returned nil, and
// calling it earlier changes nothing. It may be called after the handler
// returned, from any goroutine, as long as this instance holds the lease
// (ErrLeaseLost otherwise); checkpointing a batch that is older than one
// already checkpointed does nothing.
func (b Batch) Checkpoint(ctx context.Context) error {
	if b.checkpoint == nil {
		return errors.New("changefeed: this batch was not delivered by a processor")
	}
	return b.checkpoint(ctx)
}

// Handler handles a batch. When it returns nil the lease is checkpointed
// past the batch (unless Options.ManualCheckpoint); on an error the batch
// is delivered again after a backoff (with ManualCheckpoint: every batch
// after the last checkpoint). A batch may be delivered more than once (at
// least once), for example when a lease moves to another instance between
// handling and checkpoint. The batches of one lease come one at a time;
// different leases' batches come concurrently, so a Handler must be safe
// for concurrent use. Its context ends when the instance stops processing
// the lease.
type Handler func(ctx context.Context, b Batch) error

// Processor delivers a container's change feed to a Handler, sharing the
// work among every instance with the same name through leases.
type Processor struct {
	monitored *azcosmos.ContainerClient
	leases    *azcosmos.ContainerClient
	name      string
	host      string
	handler   Handler
	opts      Options

	initMu sync.Mutex
	st     *store
	feed   *feed

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

	ckMu         sync.Mutex // orders checkpoints
	checkpointed uint64     // the newest batch checkpointed
}

// New returns a processor named name of monitored's change feed, keeping its
// leases in leases: a container partitioned by /id (as the .NET and Java
// processors require for a shared lease container) or by /partitionKey.
// client is the client monitored was made from: as in the .NET processor,
// lease ids carry its endpoint's host (see Options.Host), so instances in
// any language that use the same name and endpoint share one set of leases.
func New(client *azcosmos.Client, monitored, leases *azcosmos.ContainerClient, name string, handle Handler, opts *Options) (*Processor, error) {
	if handle == nil {
		return nil, errors.New("changefeed: New needs a handler")
	}
	p, err := newProcessor(client, monitored, leases, name, opts)
	if err != nil {
		return nil, err
	}
	p.handler = handle
	return p, nil
}

func newProcessor(client *azcosmos.Client, monitored, leases *azcosmos.ContainerClient, name string, opts *Options) (*Processor, error) {
	if monitored == nil || leases == nil {
		return nil, errors.New("changefeed: a processor needs a monitored and a lease container")
	}
	if name == "" {
		return nil, errors.New("changefeed: a processor needs a name")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	host := o.Host
	if host == "" {
		if client == nil {
			return nil, errors.New("changefeed: a processor needs the client its monitored container was made from (or Options.Host)")
		}
		h, err := HostOf(client.Endpoint())
		if err != nil {
			return nil, err
		}
		host = h
	}
	return &Processor{monitored: monitored, leases: leases, name: name, host: host, opts: o,
		owned: map[string]*partition{}, seen: map[string]sighting{}}, nil
}

// Instance is the name this instance writes in the leases it owns.
func (p *Processor) Instance() string { return p.opts.Instance }

// Host is the host in this processor's lease ids (Options.Host).
func (p *Processor) Host() string { return p.host }

// Estimator returns an estimator of this processor's leases.
func (p *Processor) Estimator() *Estimator {
	return &Estimator{p: p}
}

// init reads the monitored container and creates the leases if the store is
// new.
func (p *Processor) init(ctx context.Context) error {
	if err := p.open(ctx); err != nil {
		return err
	}
	created, err := bootstrap(ctx, p.st, p.feed, p.opts.PollInterval, p.opts.Instance)
	if err != nil {
		return err
	}
	if created {
		p.warnOtherStores(ctx)
	}
	all, err := p.st.list(ctx)
	if err != nil {
		return err
	}
	for _, l := range all {
		if m := l.Mode; m != "" && m != p.opts.Mode.leaseMode() {
			return fmt.Errorf("changefeed: the leases of %q were written in mode %q, this processor reads %q: use another processor name", p.name, m, p.opts.Mode.leaseMode())
		}
	}
	return nil
}

// open reads the monitored container once: its resource id and the lease
// prefix.
func (p *Processor) open(ctx context.Context) error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	if p.st != nil {
		return nil
	}
	rid, prefix, err := prefixOf(ctx, p.monitored, p.name, p.host)
	if err != nil {
		return err
	}
	// The SDK's routing map, read with a plain context before any read in
	// all-versions mode (whose headers would otherwise reach it).
	if _, err := p.monitored.ReadFeedRanges(ctx, nil); err != nil {
		return fmt.Errorf("changefeed: reading feed ranges: %w", err)
	}
	p.feed = &feed{monitored: p.monitored, rid: rid, mode: p.opts.Mode, from: p.opts.StartFrom}
	p.st = &store{c: p.leases, prefix: prefix, mode: p.opts.Mode}
	return nil
}

// Run processes the feed until ctx ends, then releases the leases it holds
// and returns ctx's error (or the error that stopped it).
func (p *Processor) Run(ctx context.Context) error {
	if p.handler == nil {
		return errors.New("changefeed: this processor has no handler")
	}
	// A transient fault while starting (the service busy or unavailable,
	// a partition moving, a lost reply) is retried, not returned: an
	// instance that gives up at start leaves its share of the feed to the
	// others, or to nobody.
	for failures := 1; ; failures++ {
		err := p.init(ctx)
		if err == nil {
			break
		}
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		p.report("", err)
		p.backoff(ctx, failures)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.mu.Lock()
	p.runCtx = runCtx
	p.mu.Unlock()
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
	p.opts.Metrics.leasesOwned.WithLabelValues(p.name).Set(float64(n))
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
	if f := p.opts.OnLeaseAcquired; f != nil {
		f(l.LeaseToken)
	}
	go func() {
		// Told before done closes: the lease cannot be started again
		// (and told acquired) before its release was told.
		defer close(pt.done)
		defer func() {
			if f := p.opts.OnLeaseReleased; f != nil && !p.killed.Load() {
				f(l.LeaseToken)
			}
		}()
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

// checkpoint records cont as the lease's position for the seq-th batch of
// this partition, unless a newer batch was checkpointed already.
func (p *Processor) checkpoint(ctx context.Context, pt *partition, seq uint64, cont string) error {
	pt.ckMu.Lock()
	defer pt.ckMu.Unlock()
	if seq <= pt.checkpointed {
		return nil
	}
	select {
	case <-pt.done:
		return ErrLeaseLost
	default:
	}
	if cont != "" && cont != pt.snapshot().ContinuationToken {
		// A handled batch is checkpointed even when the processor is
		// stopping, so a graceful stop does not redeliver it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := p.write(cctx, pt, func(s *Lease) { s.ContinuationToken = cont })
		cancel()
		if err != nil {
			return err
		}
	}
	pt.checkpointed = seq
	return nil
}

// process reads the lease's range, hands batches to the handler and
// checkpoints after each (unless ManualCheckpoint), until the lease is lost,
// splits, or ctx ends.
func (p *Processor) process(ctx context.Context, pt *partition) {
	failures := 0
	var seq uint64
	pos := pt.snapshot().ContinuationToken // where the next read starts
	for ctx.Err() == nil {
		l := pt.snapshot()
		r, ok := l.Range()
		if !ok {
			// A version-0 lease written without its range: nothing to read.
			return
		}
		resp, err := p.feed.read(ctx, r, pos, p.opts.MaxItems)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.report(l.LeaseToken, err)
			if statusOf(err) == http.StatusGone || errors.Is(err, azcosmos.ErrFeedRangeUnresolved) {
				// The children resume from the last checkpoint: what was
				// read after it may not be handled (ManualCheckpoint).
				if done := p.splitFromService(ctx, pt, l, r); done {
					return
				}
			}
			failures++
			p.backoff(ctx, failures)
			continue
		}
		tok, _ := decodeToken(resp.ContinuationToken)
		next := ""
		if len(tok.Continuation) == 1 && tok.Continuation[0].Token != nil {
			next = *tok.Continuation[0].Token
		}
		seq++
		if len(resp.Items) > 0 {
			s, cont := seq, next
			b := Batch{LeaseToken: l.LeaseToken, Range: r, Changes: resp.Items,
				checkpoint: func(ctx context.Context) error { return p.checkpoint(ctx, pt, s, cont) }}
			if err := p.handler(ctx, b); err != nil {
				p.report(l.LeaseToken, fmt.Errorf("changefeed: handler: %w", err))
				if m := p.opts.Metrics; m != nil {
					m.failedBatches.WithLabelValues(p.name).Inc()
				}
				failures++
				p.backoff(ctx, failures)
				pos = pt.snapshot().ContinuationToken // from the last checkpoint
				continue
			}
		}
		failures = 0
		if children := splitFromToken(r, l.ContinuationToken, tok); children != nil {
			if p.opts.ManualCheckpoint {
				// Each child resumes from the parent's last checkpoint,
				// which is valid in every child.
				cur := pt.snapshot().ContinuationToken
				for i := range children {
					children[i].Continuation = cur
				}
			}
			err := p.split(ctx, pt, children)
			if err == nil {
				p.countBatch(len(resp.Items))
				return
			}
			if errors.Is(err, ErrLeaseLost) {
				return
			}
			p.report(l.LeaseToken, err)
			pos = pt.snapshot().ContinuationToken
			continue
		}
		if !p.opts.ManualCheckpoint {
			if err := p.checkpoint(ctx, pt, seq, next); err != nil {
				if errors.Is(err, ErrLeaseLost) {
					return
				}
				p.report(l.LeaseToken, err)
				continue
			}
		}
		if next != "" {
			pos = next
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

// transient reports whether a call's failure may go away by trying again
// (see coord/internal/status).
func transient(err error) bool { return status.Transient(err) }

func (p *Processor) report(lease string, err error) {
	if p.opts.OnError != nil {
		p.opts.OnError(lease, err)
	}
}

func (p *Processor) countBatch(n int) {
	if m := p.opts.Metrics; m != nil && n > 0 {
		m.handledBatches.WithLabelValues(p.name).Inc()
		m.changes.WithLabelValues(p.name).Add(float64(n))
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
// resuming from the parent's checkpoint. It reports whether the lease was
// replaced.
func (p *Processor) splitFromService(ctx context.Context, pt *partition, l Lease, r azcosmos.FeedRange) bool {
	ranges, err := p.monitored.ReadFeedRanges(ctx, nil)
	if err != nil {
		return false
	}
	children := splitFromRanges(r, pt.snapshot().ContinuationToken, ranges)
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
	runCtx := p.runCtx
	p.mu.Unlock()
	for _, c := range made {
		p.start(runCtx, c)
	}
	return nil
}

// lagLoop publishes the estimated lag of the held leases.
func (p *Processor) lagLoop(ctx context.Context) {
	defer p.wg.Done()
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
			n, err := leaseLag(ctx, p.feed, &l)
			if err == nil {
				p.opts.Metrics.lag.WithLabelValues(p.name, l.LeaseToken).Set(float64(n))
			}
		}
	}
}

// bootstrap creates the leases of a new store, one per feed range, under the
// store's lock document, then marks the store initialized (.info), as the
// .NET and Java processors do.
//
// The lock names its owner (the instance, unique to it), so that a create
// whose reply was lost, retried and refused, is recognized as this
// instance's, also by a later call after a transient failure.
func bootstrap(ctx context.Context, st *store, f *feed, poll time.Duration, owner string) (created bool, err error) {
	info, lock := st.prefix+".info", st.prefix+".lock"
	for {
		if _, err := st.c.ReadItem(ctx, st.pk(info), info, nil); err == nil {
			return created, nil
		} else if statusOf(err) != http.StatusNotFound {
			return false, fmt.Errorf("changefeed: reading the lease store: %w", err)
		}
		lockDoc, _ := json.Marshal(map[string]any{"id": lock, "partitionKey": lock, "ttl": 30, "owner": owner})
		resp, err := st.c.CreateItem(ctx, st.pk(lock), lockDoc, nil)
		var lockETag azcore.ETag
		if statusOf(err) == http.StatusConflict {
			// Another instance is initializing, or this one is and lost the
			// reply; a lock older than its TTL is from a crashed one (in a
			// container without TTL) and is removed.
			cur, rerr := st.c.ReadItem(ctx, st.pk(lock), lock, nil)
			var d struct {
				TS    int64  `json:"_ts"`
				Owner string `json:"owner"`
			}
			if rerr == nil && json.Unmarshal(cur.Value, &d) == nil {
				if d.Owner == owner {
					lockETag, err = cur.ETag, nil
				} else if time.Since(time.Unix(d.TS, 0)) > 30*time.Second {
					_, _ = st.c.DeleteItem(ctx, st.pk(lock), lock, &azcosmos.ItemOptions{IfMatchEtag: &cur.ETag})
				}
			}
		} else if err == nil {
			lockETag = resp.ETag
		}
		if statusOf(err) == http.StatusConflict || (err != nil && transient(err)) {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(min(poll, time.Second)):
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("changefeed: locking the lease store: %w", err)
		}
		if err := createLeases(ctx, st, f); err != nil {
			return false, err
		}
		infoDoc, _ := json.Marshal(map[string]any{"id": info, "partitionKey": info})
		if _, err := st.c.CreateItem(ctx, st.pk(info), infoDoc, nil); err != nil && statusOf(err) != http.StatusConflict {
			return false, fmt.Errorf("changefeed: initializing the lease store: %w", err)
		}
		_, _ = st.c.DeleteItem(ctx, st.pk(lock), lock, &azcosmos.ItemOptions{IfMatchEtag: &lockETag})
		return true, nil
	}
}

// warnOtherStores tells OnError when the lease container already held a
// store of a processor of this name over this container under another
// host, when this instance has just made its own: two fleets whose hosts
// differ (an endpoint configured differently, a Host set by hand) each
// process every change.
func (p *Processor) warnOtherStores(ctx context.Context) {
	suffix := strings.TrimPrefix(p.st.prefix, p.name+p.host) + ".info"
	q := "SELECT c.id FROM c WHERE STARTSWITH(c.id, @name) AND ENDSWITH(c.id, @suffix) AND c.id != @mine"
	pager := p.leases.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{
		{Name: "@name", Value: p.name}, {Name: "@suffix", Value: suffix}, {Name: "@mine", Value: p.st.prefix + ".info"}}})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return
		}
		for _, it := range page.Items {
			var d struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(it, &d) == nil {
				other := strings.TrimSuffix(d.ID, ".info")
				p.report("", fmt.Errorf("changefeed: the lease container holds another store for this container, %q, besides this processor's new %q: "+
					"if it is this processor's under another host, both fleets process every change (its host: %q; Options.Host shares its leases)",
					other, p.st.prefix, strings.TrimSuffix(strings.TrimPrefix(other, p.name), suffix[:len(suffix)-len(".info")])))
			}
		}
	}
}

// createLeases creates a lease for every feed range no lease covers yet.
// When starting from now the current position is read and stored, so "now"
// is when the processor was first started, not when a lease is first read.
func createLeases(ctx context.Context, st *store, f *feed) error {
	ranges, err := f.monitored.ReadFeedRanges(ctx, nil)
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
		if f.from.now(f.mode) {
			resp, err := f.read(ctx, r, "", 1)
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
