package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/prometheus/client_golang/prometheus"
)

// RelayOptions configure a Relay.
type RelayOptions struct {
	// Processor configures the change feed processor that reads the
	// container (its Name defaults to "outbox-relay"); StartFrom should
	// stay at the beginning so no record written before the first start is
	// missed.
	Processor changefeed.Options
	// RetryInitial and RetryMax bound the exponential backoff (full
	// jitter) between attempts to publish one message; defaults 100 ms and
	// 30 s. A message is retried until it is published or the relay stops:
	// the later messages of its partition key wait, to keep their order.
	RetryInitial, RetryMax time.Duration
	// KeepSent, when positive, gives published records that TTL in seconds
	// (the container needs TTL enabled); otherwise they stay, marked sent.
	KeepSent int
	// Metrics, when set, receive the relay's measures, refreshed every
	// StatsInterval (default 15 s).
	Metrics       *Metrics
	StatsInterval time.Duration
}

// Relay publishes the outbox records of a container from its change feed,
// at least once and in order per partition key. It marks each published
// record sent with a patch; the patched record comes back through the feed
// and is recognized by its sentAt and skipped, so marking never re-triggers
// a publication.
type Relay struct {
	c          *azcosmos.ContainerClient
	pub        Publisher
	pkProperty string
	opts       RelayOptions
	proc       *changefeed.Processor
	est        *changefeed.Estimator
}

// NewRelay returns a relay of the outbox records in c (partitioned by
// "/" + pkProperty), keeping its leases in leases.
func NewRelay(c, leases *azcosmos.ContainerClient, pkProperty string, pub Publisher, opts RelayOptions) *Relay {
	if opts.Processor.Name == "" {
		opts.Processor.Name = "outbox-relay"
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = 100 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	if opts.StatsInterval <= 0 {
		opts.StatsInterval = 15 * time.Second
	}
	r := &Relay{c: c, pub: pub, pkProperty: pkProperty, opts: opts}
	r.proc = changefeed.New(c, leases, r.handle, opts.Processor)
	r.est = changefeed.NewEstimator(c, leases, opts.Processor)
	return r
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	if r.opts.Metrics != nil {
		go r.statsLoop(ctx)
	}
	return r.proc.Run(ctx)
}

// handle publishes the unsent outbox records of a batch, in feed order.
func (r *Relay) handle(ctx context.Context, b changefeed.Batch) error {
	for _, raw := range b.Changes {
		var rec record
		if err := json.Unmarshal(raw, &rec); err != nil || rec.Kind != Kind || rec.SentAt != "" {
			continue // a business document, or the echo of a mark
		}
		if err := r.publish(ctx, rec.Message); err != nil {
			return err
		}
		if err := r.markSent(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

// publish retries until the message is published or ctx ends.
func (r *Relay) publish(ctx context.Context, m Message) error {
	wait := r.opts.RetryInitial
	for {
		err := r.pub.Publish(ctx, m)
		if err == nil {
			if r.opts.Metrics != nil {
				r.opts.Metrics.published.Inc()
			}
			return nil
		}
		if r.opts.Metrics != nil {
			r.opts.Metrics.failures.Inc()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("outbox: publishing %s: %w (last error: %v)", m.ID, ctx.Err(), err)
		case <-time.After(rand.N(wait) + time.Millisecond):
		}
		wait = min(wait*2, r.opts.RetryMax)
	}
}

// markSent records the publication on the outbox record.
func (r *Relay) markSent(ctx context.Context, rec record) error {
	ops := azcosmos.PatchOperations{}
	ops.AppendSet("/sentAt", time.Now().UTC().Format(time.RFC3339Nano))
	if r.opts.KeepSent > 0 {
		ops.AppendSet("/ttl", r.opts.KeepSent)
	}
	_, err := r.c.PatchItem(ctx, azcosmos.NewPartitionKeyString(rec.PartitionKey), rec.ID, ops, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return nil // removed (or expired) meanwhile
	}
	return err
}

// Stats are the relay's backlog figures.
type Stats struct {
	// Unsent is the number of outbox records not yet marked sent.
	Unsent int
	// OldestUnsent is the age of the oldest unsent record (by the
	// server's _ts), zero when none.
	OldestUnsent time.Duration
	// Lag is the number of changes of the container the relay has yet to
	// read (business documents included).
	Lag int64
}

// Stats measures the backlog: a query for the unsent records and the
// processor's estimator.
func (r *Relay) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	q := "SELECT c._ts FROM c WHERE c.kind = @k AND NOT IS_DEFINED(c.sentAt)"
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
	backlog, oldest, lag prometheus.Gauge
	published, failures  prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (when not
// nil):
//
//	coord_outbox_backlog                     unsent outbox records
//	coord_outbox_oldest_unsent_age_seconds   age of the oldest unsent record
//	coord_outbox_lag                         changes the relay has yet to read
//	coord_outbox_published_total             publications (retries included)
//	coord_outbox_publish_failures_total      failed publication attempts
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "coord", Subsystem: "outbox", Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "coord", Subsystem: "outbox", Name: name, Help: help})
	}
	m := &Metrics{
		backlog:   g("backlog", "Outbox records not yet marked sent."),
		oldest:    g("oldest_unsent_age_seconds", "Age of the oldest unsent outbox record."),
		lag:       g("lag", "Changes of the container the relay has yet to read."),
		published: c("published_total", "Messages published (a message may be published more than once)."),
		failures:  c("publish_failures_total", "Failed publication attempts."),
	}
	if reg != nil {
		reg.MustRegister(m.backlog, m.oldest, m.lag, m.published, m.failures)
	}
	return m
}
