package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/coord/changefeed"
)

// DeadLetterPartitionKeyPath is the partition key path a dead-letter
// container must have: each dead letter's id is its message's id.
const DeadLetterPartitionKeyPath = "/id"

// DeadLetter is a message the relay gave up on after RelayOptions.MaxAttempts
// failed publications, as written to the dead-letter container and given
// to the OnDeadLetter hook.
type DeadLetter struct {
	// ID is the message's id (and the dead-letter document's).
	ID string `json:"id"`
	// Message is the message.
	Message Message `json:"message"`
	// Container is the id of the container the outbox record is in.
	Container string `json:"container"`
	// Attempts is the number of failed publications.
	Attempts int `json:"attempts"`
	// Error is the publisher's last error.
	Error string `json:"error"`
	// At is when the relay gave up.
	At time.Time `json:"deadLetteredAt"`
}

// CreateDeadLetterContainer creates a dead-letter container fit for
// RelayOptions.DeadLetters in db (partition key DeadLetterPartitionKeyPath)
// if it does not exist, and returns it.
func CreateDeadLetterContainer(ctx context.Context, db *azcosmos.DatabaseClient, id string) (*azcosmos.ContainerClient, error) {
	_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     id,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{DeadLetterPartitionKeyPath}},
	}, nil)
	var re *azcore.ResponseError
	if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusConflict) {
		return nil, fmt.Errorf("outbox: creating container %q: %w", id, err)
	}
	return db.NewContainer(id)
}

// RelayOptions configure a Relay. The zero value (or nil) takes every
// default.
type RelayOptions struct {
	// Name is the name of the relay's change-feed processor, the first part
	// of its lease ids; relays of one container with the same name share
	// the work. Default "outbox-relay".
	Name string
	// Processor configures the change-feed processor that reads the
	// container; its ManualCheckpoint is always on (the relay checkpoints
	// a batch once every message in it is published or dead-lettered).
	// Its StartFrom should stay at the beginning so no record written
	// before the first start is missed.
	Processor *changefeed.Options
	// RetryInitial and RetryMax bound the exponential backoff (full
	// jitter) between attempts to publish one message; defaults 100 ms and
	// 30 s.
	RetryInitial, RetryMax time.Duration
	// MaxAttempts, when positive, is how many times a message is offered
	// to the publisher before the relay gives up on it: it is then written
	// to DeadLetters and given to OnDeadLetter, its record is marked
	// dead-lettered, and the later messages of its partition key go on.
	// Zero: a message is retried until it is published or the relay
	// stops, and the later messages of its key wait.
	MaxAttempts int
	// DeadLetters, when set, receives a DeadLetter document per message
	// given up on (CreateDeadLetterContainer makes one).
	DeadLetters *azcosmos.ContainerClient
	// OnDeadLetter, when set, is called with each message given up on,
	// after it was written to DeadLetters. An error is retried like a
	// publication (the message stays in the relay's hands meanwhile).
	OnDeadLetter func(ctx context.Context, d DeadLetter) error
	// Concurrency is how many messages (of different partition keys) are
	// published at once per lease; default 16. Messages of one partition
	// key are published one at a time, in order, while the others go on.
	Concurrency int
	// MaxInFlight is how many messages per lease the relay holds read but
	// not yet published before it stops reading that lease; default 1000.
	MaxInFlight int
	// KeepSent, when positive, gives published (and dead-lettered) records
	// that TTL in seconds (the container needs TTL enabled); otherwise they
	// stay, marked.
	KeepSent int
	// Metrics, when set, receive the relay's measures, refreshed every
	// StatsInterval (default 15 s).
	Metrics       *Metrics
	StatsInterval time.Duration
}

// Relay publishes the outbox records of a container from its change feed,
// at least once and in order per partition key. It marks each published
// record sent with a patch; the patched record comes back through the feed
// and is recognized by its mark and skipped, so marking never re-triggers
// a publication.
type Relay struct {
	c       *azcosmos.ContainerClient
	pub     Publisher
	opts    RelayOptions
	proc    *changefeed.Processor
	est     *changefeed.Estimator
	onError func(lease string, err error) // the processor's OnError

	mu sync.Mutex
	// leases is the work of each lease being processed, by the context
	// the processor hands the lease's batches with: one per time this
	// instance holds a lease, dropped when it ends.
	leases map[context.Context]*leaseWork
}

// NewRelay returns a relay of the outbox records in c to pub, keeping its
// leases in leases (a container partitioned by /id). client is the client
// c was made from (changefeed.New). pub must be safe for concurrent use:
// messages of different partition keys are published concurrently.
func NewRelay(client *azcosmos.Client, c, leases *azcosmos.ContainerClient, pub Publisher, opts *RelayOptions) (*Relay, error) {
	var o RelayOptions
	if opts != nil {
		o = *opts
	}
	if pub == nil {
		return nil, errors.New("outbox: a relay needs a publisher")
	}
	if o.Name == "" {
		o.Name = "outbox-relay"
	}
	if o.RetryInitial <= 0 {
		o.RetryInitial = 100 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.MaxAttempts < 0 {
		o.MaxAttempts = 0
	}
	if o.MaxAttempts > 0 && o.DeadLetters == nil && o.OnDeadLetter == nil {
		return nil, errors.New("outbox: MaxAttempts needs DeadLetters or OnDeadLetter: a message given up on must go somewhere")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1000
	}
	if o.StatsInterval <= 0 {
		o.StatsInterval = 15 * time.Second
	}
	r := &Relay{c: c, pub: pub, opts: o, leases: map[context.Context]*leaseWork{}}
	var po changefeed.Options
	if o.Processor != nil {
		po = *o.Processor
	}
	r.onError = po.OnError
	po.ManualCheckpoint = true
	proc, err := changefeed.New(client, c, leases, o.Name, r.handle, &po)
	if err != nil {
		return nil, err
	}
	r.proc = proc
	r.est = proc.Estimator()
	return r, nil
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	if r.opts.Metrics != nil {
		go r.statsLoop(ctx)
	}
	return r.proc.Run(ctx)
}

// leaseWork is what the relay does for one lease: the batches read and not
// yet checkpointed, in feed order, and a lane per partition key with
// messages waiting.
type leaseWork struct {
	mu       sync.Mutex
	batches  []*pending
	lanes    map[string]*lane
	inFlight int
	room     chan struct{} // signalled when inFlight drops
	sem      chan struct{} // bounds concurrent publications
}

// pending is a batch and the number of its messages not yet done.
type pending struct {
	b    changefeed.Batch
	left int
}

// lane is one partition key's messages, in order.
type lane struct {
	jobs []job
}

type job struct {
	rec record
	p   *pending
}

func (r *Relay) newLeaseWork() *leaseWork {
	return &leaseWork{lanes: map[string]*lane{}, room: make(chan struct{}, 1), sem: make(chan struct{}, r.opts.Concurrency)}
}

// work returns the work of the lease whose batches come with ctx, made on
// first use and dropped when ctx ends (the lease is no longer held).
func (r *Relay) work(ctx context.Context) *leaseWork {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.leases[ctx]
	if w == nil {
		w = r.newLeaseWork()
		r.leases[ctx] = w
		context.AfterFunc(ctx, func() {
			r.mu.Lock()
			delete(r.leases, ctx)
			r.mu.Unlock()
		})
	}
	return w
}

// handle queues the unsent outbox records of a batch on their keys' lanes
// and returns; the batch is checkpointed once all of them are done.
func (r *Relay) handle(ctx context.Context, b changefeed.Batch) error {
	w := r.work(ctx)
	var recs []record
	for _, raw := range b.Changes {
		var rec record
		if err := json.Unmarshal(raw, &rec); err != nil || rec.Kind != Kind || rec.SentAt != "" || rec.DeadLettered != "" {
			continue // a business document, or the echo of a mark
		}
		recs = append(recs, rec)
	}
	// Hold back while too much is in flight (a key stuck on a message
	// that keeps failing, with MaxAttempts 0).
	for {
		w.mu.Lock()
		full := w.inFlight > 0 && w.inFlight+len(recs) > r.opts.MaxInFlight
		w.mu.Unlock()
		if !full {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.room:
		}
	}
	p := &pending{b: b, left: len(recs)}
	w.mu.Lock()
	w.batches = append(w.batches, p)
	w.inFlight += len(recs)
	for _, rec := range recs {
		key := rec.Key()
		l := w.lanes[key]
		if l == nil {
			l = &lane{}
			w.lanes[key] = l
			go r.runLane(ctx, w, key, l)
		}
		l.jobs = append(l.jobs, job{rec: rec, p: p})
	}
	w.mu.Unlock()
	if len(recs) == 0 {
		r.advance(ctx, w)
	}
	return nil
}

// runLane publishes one key's messages in order until its lane is empty
// (or the lease is lost: ctx ends, and the lease's next owner takes over
// from the last checkpoint).
func (r *Relay) runLane(ctx context.Context, w *leaseWork, key string, l *lane) {
	for {
		w.mu.Lock()
		if len(l.jobs) == 0 {
			delete(w.lanes, key)
			w.mu.Unlock()
			return
		}
		j := l.jobs[0]
		w.mu.Unlock()
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		err := r.deliver(ctx, j.rec)
		<-w.sem
		if err != nil {
			return // ctx ended: the lease is no longer ours
		}
		w.mu.Lock()
		l.jobs = l.jobs[1:]
		j.p.left--
		w.inFlight--
		w.mu.Unlock()
		select {
		case w.room <- struct{}{}:
		default:
		}
		r.advance(ctx, w)
	}
}

// advance checkpoints the newest batch all of whose messages, and all
// earlier batches' messages, are done.
func (r *Relay) advance(ctx context.Context, w *leaseWork) {
	w.mu.Lock()
	var done *pending
	for len(w.batches) > 0 && w.batches[0].left == 0 {
		done = w.batches[0]
		w.batches = w.batches[1:]
	}
	w.mu.Unlock()
	if done != nil {
		// A lost lease (ErrLeaseLost) is taken over from its last
		// checkpoint; other failures are retried by the next checkpoint.
		if err := done.b.Checkpoint(ctx); err != nil && !errors.Is(err, changefeed.ErrLeaseLost) && r.onError != nil {
			r.onError(done.b.LeaseToken, fmt.Errorf("outbox: checkpoint: %w", err))
		}
	}
}

// deliver publishes a record's message, retrying with backoff, and marks
// the record sent; after MaxAttempts failures it dead-letters the message
// instead. It fails only when ctx ends.
func (r *Relay) deliver(ctx context.Context, rec record) error {
	wait := r.opts.RetryInitial
	var last error
	for attempt := 1; ; attempt++ {
		err := r.pub.Publish(ctx, rec.Message)
		if err == nil {
			if r.opts.Metrics != nil {
				r.opts.Metrics.published.Inc()
			}
			return r.retry(ctx, func() error { return r.mark(ctx, rec, "/sentAt") })
		}
		last = err
		if ctx.Err() != nil {
			return fmt.Errorf("outbox: publishing %s: %w (last error: %v)", rec.Message.ID, ctx.Err(), last)
		}
		if r.opts.Metrics != nil {
			r.opts.Metrics.failures.Inc()
		}
		if r.onError != nil {
			r.onError("", fmt.Errorf("outbox: publishing %s (attempt %d): %w", rec.Message.ID, attempt, err))
		}
		if r.opts.MaxAttempts > 0 && attempt >= r.opts.MaxAttempts {
			d := DeadLetter{ID: rec.Message.ID, Message: rec.Message, Container: r.c.ID(), Attempts: attempt, Error: last.Error(), At: time.Now().UTC()}
			return r.retry(ctx, func() error { return r.deadLetter(ctx, rec, d) })
		}
		if err := sleep(ctx, rand.N(wait)+time.Millisecond); err != nil {
			return fmt.Errorf("outbox: publishing %s: %w (last error: %v)", rec.Message.ID, err, last)
		}
		wait = min(wait*2, r.opts.RetryMax)
	}
}

// retry runs f until it succeeds or ctx ends, with the relay's backoff.
func (r *Relay) retry(ctx context.Context, f func() error) error {
	wait := r.opts.RetryInitial
	for {
		err := f()
		if err == nil {
			return nil
		}
		if r.onError != nil {
			r.onError("", err)
		}
		if err := sleep(ctx, rand.N(wait)+time.Millisecond); err != nil {
			return err
		}
		wait = min(wait*2, r.opts.RetryMax)
	}
}

// deadLetter writes d to the dead-letter container (create-only: a second
// relay giving up on the same message after a crash finds it there), calls
// the hook, and marks the record dead-lettered.
func (r *Relay) deadLetter(ctx context.Context, rec record, d DeadLetter) error {
	if r.opts.DeadLetters != nil {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		_, err = r.opts.DeadLetters.CreateItem(ctx, azcosmos.NewPartitionKeyString(d.ID), b, nil)
		var re *azcore.ResponseError
		if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusConflict) {
			return fmt.Errorf("outbox: writing dead letter %s: %w", d.ID, err)
		}
	}
	if r.opts.OnDeadLetter != nil {
		if err := r.opts.OnDeadLetter(ctx, d); err != nil {
			return fmt.Errorf("outbox: dead-letter hook for %s: %w", d.ID, err)
		}
	}
	if err := r.mark(ctx, rec, "/deadLetteredAt"); err != nil {
		return err
	}
	if r.opts.Metrics != nil {
		r.opts.Metrics.deadLettered.Inc()
	}
	return nil
}

// mark records the publication (or the dead-lettering) on the record.
func (r *Relay) mark(ctx context.Context, rec record, path string) error {
	pk, err := rec.Message.partitionKey()
	if err != nil {
		return fmt.Errorf("outbox: record %s: %w", rec.ID, err)
	}
	ops := azcosmos.PatchOperations{}
	ops.AppendSet(path, time.Now().UTC().Format(time.RFC3339Nano))
	if r.opts.KeepSent > 0 {
		ops.AppendSet("/ttl", r.opts.KeepSent)
	}
	_, err = r.c.PatchItem(ctx, pk, rec.ID, ops, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return nil // removed (or expired) meanwhile
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stats are the relay's backlog figures.
type Stats struct {
	// Unsent is the number of outbox records neither marked sent nor
	// dead-lettered.
	Unsent int
	// OldestUnsent is the age of the oldest unsent record (by the
	// server's _ts), zero when none.
	OldestUnsent time.Duration
	// Lag is the number of changes of the container the relay has yet to
	// checkpoint past (business documents included).
	Lag int64
}

// Stats measures the backlog: a query for the unsent records and the
// processor's estimator.
func (r *Relay) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	q := "SELECT c._ts FROM c WHERE c.kind = @k AND NOT IS_DEFINED(c.sentAt) AND NOT IS_DEFINED(c.deadLetteredAt)"
	pager := r.c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{
		QueryParameters: []azcosmos.QueryParameter{{Name: "@k", Value: Kind}}})
	oldest := int64(0)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return s, fmt.Errorf("outbox: counting unsent records: %w", err)
		}
		for _, it := range page.Items {
			var d struct {
				TS int64 `json:"_ts"`
			}
			if json.Unmarshal(it, &d) == nil {
				s.Unsent++
				if oldest == 0 || d.TS < oldest {
					oldest = d.TS
				}
			}
		}
	}
	if oldest > 0 {
		s.OldestUnsent = max(time.Since(time.Unix(oldest, 0)), 0)
	}
	lag, err := r.est.Total(ctx)
	if err != nil {
		return s, err
	}
	s.Lag = lag
	return s, nil
}

func (r *Relay) statsLoop(ctx context.Context) {
	for {
		if s, err := r.Stats(ctx); err == nil {
			r.opts.Metrics.backlog.Set(float64(s.Unsent))
			r.opts.Metrics.oldest.Set(s.OldestUnsent.Seconds())
			r.opts.Metrics.lag.Set(float64(s.Lag))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.StatsInterval):
		}
	}
}

// Metrics are a relay's Prometheus collectors.
type Metrics struct {
	backlog, oldest, lag              prometheus.Gauge
	published, failures, deadLettered prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (when not
// nil):
//
//	coord_outbox_backlog                     unsent outbox records
//	coord_outbox_oldest_unsent_age_seconds   age of the oldest unsent record
//	coord_outbox_lag                         changes the relay has yet to checkpoint
//	coord_outbox_published_total             publications (retries included)
//	coord_outbox_publish_failures_total      failed publication attempts
//	coord_outbox_dead_lettered_total         messages given up on
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "coord", Subsystem: "outbox", Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "coord", Subsystem: "outbox", Name: name, Help: help})
	}
	m := &Metrics{
		backlog:      g("backlog", "Outbox records neither marked sent nor dead-lettered."),
		oldest:       g("oldest_unsent_age_seconds", "Age of the oldest unsent outbox record."),
		lag:          g("lag", "Changes of the container the relay has yet to checkpoint past."),
		published:    c("published_total", "Messages published (a message may be published more than once)."),
		failures:     c("publish_failures_total", "Failed publication attempts."),
		deadLettered: c("dead_lettered_total", "Messages given up on after MaxAttempts failed publications."),
	}
	if reg != nil {
		reg.MustRegister(m.backlog, m.oldest, m.lag, m.published, m.failures, m.deadLettered)
	}
	return m
}
