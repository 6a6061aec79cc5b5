package changefeed

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a processor's Prometheus collectors, labelled by processor
// name (and lease token for lag). One Metrics may serve several processors.
type Metrics struct {
	leasesOwned    *prometheus.GaugeVec
	lag            *prometheus.GaugeVec
	handledBatches *prometheus.CounterVec
	failedBatches  *prometheus.CounterVec
	changes        *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (when not
// nil):
//
//	coord_changefeed_leases_owned{processor}         leases this instance holds
//	coord_changefeed_estimated_lag{processor,lease}  changes not yet delivered
//	coord_changefeed_batches_handled_total{processor}
//	coord_changefeed_batches_failed_total{processor} handler errors
//	coord_changefeed_changes_delivered_total{processor}
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leasesOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "coord", Subsystem: "changefeed",
			Name: "leases_owned", Help: "Leases held by this processor instance."}, []string{"processor"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "coord", Subsystem: "changefeed",
			Name: "estimated_lag", Help: "Changes not yet delivered, per lease (estimator)."}, []string{"processor", "lease"}),
		handledBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coord", Subsystem: "changefeed",
			Name: "batches_handled_total", Help: "Batches the handler accepted and that were checkpointed."}, []string{"processor"}),
		failedBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coord", Subsystem: "changefeed",
			Name: "batches_failed_total", Help: "Batches the handler returned an error for (they are delivered again)."}, []string{"processor"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "coord", Subsystem: "changefeed",
			Name: "changes_delivered_total", Help: "Changes handed to the handler in accepted batches."}, []string{"processor"}),
	}
	if reg != nil {
		reg.MustRegister(m.leasesOwned, m.lag, m.handledBatches, m.failedBatches, m.changes)
	}
	return m
}
