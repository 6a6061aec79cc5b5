package server

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
)

// NewEngineCollector returns a Prometheus collector of the engine's figures
// (engine.Stats): the change feed's watermark and each container's lag
// behind it, the TTL backlog, and the script runs by kind and outcome. It
// computes them at each scrape, at the cost of a few seeks per container.
func NewEngineCollector(e *engine.Engine) prometheus.Collector {
	return &engineCollector{e: e}
}

type engineCollector struct{ e *engine.Engine }

var (
	containerLabels = []string{"database", "container"}

	descWatermark = prometheus.NewDesc("orrery_changefeed_watermark_lsn",
		"The LSN change-feed readers may read up to: every write at or below it has finished.", nil, nil)
	descNewest = prometheus.NewDesc("orrery_lsn_newest",
		"The highest LSN handed out to a write.", nil, nil)
	descInFlight = prometheus.NewDesc("orrery_writes_in_flight",
		"Writes holding an LSN that have not finished; the oldest holds the change-feed watermark back.", nil, nil)
	descContainerNewest = prometheus.NewDesc("orrery_changefeed_newest_lsn",
		"LSN of the container's newest change in its latest-version feed.", containerLabels, nil)
	descUnpublished = prometheus.NewDesc("orrery_changefeed_unpublished_changes",
		"Changes of the container committed above the watermark, not yet visible to change-feed readers (counted up to 1000).", containerLabels, nil)
	descUnpublishedAge = prometheus.NewDesc("orrery_changefeed_unpublished_age_seconds",
		"Age (by _ts) of the container's oldest change committed above the watermark; 0 when none.", containerLabels, nil)
	descFeedPosition = prometheus.NewDesc("orrery_changefeed_read_lsn",
		"The furthest position a change-feed read of the container has been answered up to, by any reader and scope; absent until one was.", containerLabels, nil)
	descFeedLag = prometheus.NewDesc("orrery_changefeed_lag_changes",
		"Changes of the container's latest-version feed between the furthest read position and the watermark (counted up to 1000).", containerLabels, nil)
	descFeedLagAge = prometheus.NewDesc("orrery_changefeed_lag_seconds",
		"Age (by _ts) of the oldest change no change-feed reader of the container has been given yet; 0 when caught up.", containerLabels, nil)
	descTTLBacklog = prometheus.NewDesc("orrery_ttl_backlog_items",
		"Expired items of the container not yet deleted by the TTL sweeper (counted up to 1000); only containers with TTL on.", containerLabels, nil)
	descTTLSwept = prometheus.NewDesc("orrery_ttl_swept_items_total",
		"Expired items the TTL sweeper has deleted.", nil, nil)
	descScriptRuns = prometheus.NewDesc("orrery_script_runs_total",
		"Script runs by kind (sproc, trigger, udf) and outcome (ok, error, timeout, memory, quantum, cancelled, rejected).", []string{"kind", "outcome"}, nil)
	descScriptsRunning = prometheus.NewDesc("orrery_scripts_running",
		"Stored procedures and triggers running now.", nil, nil)
	descScriptsWaiting = prometheus.NewDesc("orrery_scripts_waiting",
		"Stored procedures and triggers waiting for a slot to run.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWatermark, descNewest, descInFlight, descContainerNewest,
		descUnpublished, descUnpublishedAge, descFeedPosition, descFeedLag, descFeedLagAge,
		descTTLBacklog, descTTLSwept, descScriptRuns, descScriptsRunning, descScriptsWaiting} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	// prometheus.Collector passes no context; the store's own timeout bounds
	// the reads.
	st, err := c.e.Stats(context.Background())
	if err != nil {
		slog.Warn("collecting the engine's metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(descWatermark, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descWatermark, float64(st.Watermark))
	gauge(descNewest, float64(st.NewestLSN))
	gauge(descInFlight, float64(st.InFlight))
	for _, cs := range st.Containers {
		l := []string{cs.Database, cs.Container}
		gauge(descContainerNewest, float64(cs.NewestLSN), l...)
		gauge(descUnpublished, float64(cs.Unpublished), l...)
		gauge(descUnpublishedAge, cs.UnpublishedAge.Seconds(), l...)
		if cs.FeedRead {
			gauge(descFeedPosition, float64(cs.FeedPosition), l...)
			gauge(descFeedLag, float64(cs.FeedLag), l...)
			gauge(descFeedLagAge, cs.FeedLagAge.Seconds(), l...)
		}
		if cs.TTL {
			gauge(descTTLBacklog, float64(cs.TTLBacklog), l...)
		}
	}
	counter(descTTLSwept, float64(st.TTLSwept))
	for _, r := range st.ScriptRuns {
		counter(descScriptRuns, float64(r.Count), r.Kind, r.Outcome)
	}
	gauge(descScriptsRunning, float64(st.ScriptsRunning))
	gauge(descScriptsWaiting, float64(st.ScriptsWaiting))
}

// NewFaultCollector returns a Prometheus collector of the faults s injects:
// each installed rule's hits, and the requests refused for want of
// throughput budget (with --enforce-throughput).
func NewFaultCollector(s *Server) prometheus.Collector { return &faultCollector{s: s} }

type faultCollector struct{ s *Server }

var (
	descFaultHits = prometheus.NewDesc("orrery_fault_injections_total",
		"Requests a fault rule has faulted, by rule id and fault type (the rules installed now).", []string{"rule", "type"}, nil)
	descThrottled = prometheus.NewDesc("orrery_throughput_throttled_total",
		"Requests answered 429 because their partition's provisioned throughput was spent (--enforce-throughput).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *faultCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFaultHits
	ch <- descThrottled
}

// Collect implements prometheus.Collector.
func (c *faultCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.s.faults.List() {
		ch <- prometheus.MustNewConstMetric(descFaultHits, prometheus.CounterValue, float64(r.Hits), r.ID, string(r.Result.Type))
	}
	if c.s.throttle != nil {
		ch <- prometheus.MustNewConstMetric(descThrottled, prometheus.CounterValue, float64(c.s.throttle.Throttled()))
	}
}
