package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ObserveOptions configure Observe.
type ObserveOptions struct {
	// Registerer receives the request metrics; nil registers none.
	Registerer prometheus.Registerer
	// Gatherer, when set, is served at /metrics on the wrapped port, to
	// requests that carry MetricsKey as a bearer token.
	Gatherer   prometheus.Gatherer
	MetricsKey string
	// AccessLog, when set, gets one info line per request.
	AccessLog *slog.Logger
	// Trace makes a span of each request, continuing the caller's trace
	// context, with the global OpenTelemetry tracer provider; without it
	// a request pays nothing for tracing.
	Trace bool
	// PprofKey, when set, serves Go's runtime profiles (net/http/pprof)
	// under PprofPrefix to requests that carry it as a bearer token; the
	// path is the API's (an unknown path) without it.
	PprofKey string
}

// Observe wraps the server's handler with what an operator watches: an
// access log line and Prometheus metrics per request, and, if asked, the
// metrics endpoint. It fails when the metrics cannot be registered (say,
// opts.Registerer has metrics of these names already).
func Observe(h http.Handler, opts ObserveOptions) (http.Handler, error) {
	o := &observer{next: h, log: opts.AccessLog, trace: opts.Trace}
	if opts.AccessLog != nil {
		if th, ok := opts.AccessLog.Handler().(*textLogHandler); ok && th.direct {
			o.text = th
		}
	}
	if opts.Registerer != nil {
		o.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orrery_requests_total", Help: "Requests answered, by operation and status.",
		}, []string{"operation", "status"})
		o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orrery_request_duration_seconds", Help: "Time to answer a request, by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation"})
		o.charge = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orrery_request_charge_total", Help: "Request units charged, by operation.",
		}, []string{"operation"})
		for _, c := range []prometheus.Collector{o.requests, o.duration, o.charge} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("server: registering the request metrics: %w", err)
			}
		}
	}
	if opts.Gatherer != nil {
		o.metrics = promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})
		o.metricsAuth = "Bearer " + opts.MetricsKey
	}
	if opts.PprofKey != "" {
		o.pprof = newPprofHandler()
		o.pprofAuth = "Bearer " + opts.PprofKey
	}
	return o, nil
}

// tracer makes the server's spans, from the global tracer provider.
var tracer = otel.Tracer("github.com/orrery-db/orrery/server")

type observer struct {
	next http.Handler
	log  *slog.Logger
	// text is log's handler when the observer writes its lines (see
	// NewTextLogHandler).
	text        *textLogHandler
	trace       bool
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	charge      *prometheus.CounterVec
	metrics     http.Handler
	metricsAuth string
	pprof       http.Handler
	pprofAuth   string
	// series are the classified operations' names and metrics by status,
	// looked up once each (see seriesOf): a map never changed once
	// stored, read without a lock; seriesMu is held to store another.
	seriesMu sync.Mutex
	series   atomic.Pointer[map[seriesKey]*series]
}

type seriesKey struct {
	op     operation
	status int
}

// series is what a request of one operation answered with one status is
// counted in: the operation's name and, with metrics on, its metrics.
type series struct {
	op       string
	requests prometheus.Counter
	duration prometheus.Observer
	// charge is made at the operation's first charge, as
	// o.charge.WithLabelValues would make it.
	chargeOnce sync.Once
	charge     prometheus.Counter
}

// seriesOf returns the series of op answered with status, made at its
// first request: the operation's name and its metrics' label lookups are
// then paid once, not on every request.
func (o *observer) seriesOf(op operation, status int) *series {
	k := seriesKey{op, status}
	if m := o.series.Load(); m != nil {
		if s := (*m)[k]; s != nil {
			return s
		}
	}
	o.seriesMu.Lock()
	defer o.seriesMu.Unlock()
	var next map[seriesKey]*series
	if m := o.series.Load(); m != nil {
		if s := (*m)[k]; s != nil {
			return s
		}
		next = maps.Clone(*m)
	} else {
		next = make(map[seriesKey]*series)
	}
	s := &series{op: op.String()}
	if o.requests != nil {
		s.requests = o.requests.WithLabelValues(s.op, strconv.Itoa(status))
		s.duration = o.duration.WithLabelValues(s.op)
	}
	next[k] = s
	o.series.Store(&next)
	return s
}

// addCharge counts charge (> 0) in the operation's request units.
func (s *series) addCharge(o *observer, charge float64) {
	s.chargeOnce.Do(func() { s.charge = o.charge.WithLabelValues(s.op) })
	s.charge.Add(charge)
}

func (o *observer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.metrics != nil && r.URL.Path == "/metrics" {
		if subtle.ConstantTimeCompare([]byte(header(r.Header, "Authorization")), []byte(o.metricsAuth)) != 1 {
			w.Header().Set("Www-Authenticate", `Bearer realm="orrery metrics"`)
			writeCosmosError(w, "", unauthorized("The metrics endpoint needs the master key as a bearer token (Authorization: Bearer <key>), or serve it on its own listener with --metrics-addr."))
			return
		}
		o.metrics.ServeHTTP(w, r)
		return
	}
	if o.servePprof(w, r) {
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, start: start}
	var span trace.Span
	if o.trace {
		// A span per request, continuing the caller's trace
		// (traceparent), named once the server has classified it.
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span = tracer.Start(ctx, "request", trace.WithSpanKind(trace.SpanKindServer))
		r = r.WithContext(ctx)
	}
	o.next.ServeHTTP(rec, r)
	end := time.Now()
	elapsed := end.Sub(start)
	h := rec.Header()
	status := rec.status
	switch {
	case rec.dropped:
		// A fault dropped the connection: no status was sent.
		status = 0
	case status == 0:
		status = 200
	}
	// The server classified the request (rec.op) unless it answered
	// before: a health check, the certificate, an unknown path.
	var op string
	var ser *series
	if rec.op != (operation{}) {
		ser = o.seriesOf(rec.op, status)
		op = ser.op
	} else {
		op = operationOf(r)
	}
	charge := rec.chargeOf(h)
	if span != nil && span.IsRecording() {
		span.SetName(op)
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.Int("http.response.status_code", status),
			attribute.String("db.system.name", "azure.cosmosdb"),
			attribute.String("db.operation.name", op),
			attribute.String("azure.cosmosdb.response.sub_status_code", header(h, "X-Ms-Substatus")),
			attribute.Float64("azure.cosmosdb.operation.request_charge", charge),
			attribute.String("azure.cosmosdb.activity_id", header(h, "X-Ms-Activity-Id")),
		)
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	}
	if span != nil {
		span.End()
	}
	if o.requests != nil && ser != nil {
		ser.requests.Inc()
		ser.duration.Observe(elapsed.Seconds())
		if charge > 0 {
			ser.addCharge(o, charge)
		}
	} else if o.requests != nil {
		o.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
		o.duration.WithLabelValues(op).Observe(elapsed.Seconds())
		if charge > 0 {
			o.charge.WithLabelValues(op).Add(charge)
		}
	}
	if o.log != nil && o.log.Enabled(r.Context(), slog.LevelInfo) {
		line := accessLine{method: r.Method, path: r.URL.Path, op: op, status: status, substatus: header(h, "X-Ms-Substatus"),
			duration: elapsed.Round(time.Microsecond), charge: charge, activity: header(h, "X-Ms-Activity-Id"), fault: rec.fault}
		if line.substatus == "" {
			line.substatus = "0"
		}
		o.logRequest(r.Context(), end, &line)
	}
}

// logRequest writes the access log line. On a handler of
// NewTextLogHandler the line is formatted here; otherwise it is what
// o.log.LogAttrs does, without the caller's program counter: slog takes it
// (runtime.Callers, a tenth of the line's cost) for a handler's AddSource,
// and the source of every line would be this function.
// The caller has checked that o.log is enabled at info.
func (o *observer) logRequest(ctx context.Context, t time.Time, line *accessLine) {
	if o.text != nil {
		_ = o.text.write(t, line)
		return
	}
	rec := slog.NewRecord(t, slog.LevelInfo, "request", 0)
	var attrs [9]slog.Attr
	rec.AddAttrs(line.appendAttrs(attrs[:0])...)
	_ = o.log.Handler().Handle(ctx, rec)
}

// chargeOf is the request charge the answer's header h says: the one
// writeJSON formatted into it, unless something set the header since,
// which is then parsed (ParseFloat of formatCharge's text is the charge).
func (r *statusRecorder) chargeOf(h http.Header) float64 {
	v := header(h, "X-Ms-Request-Charge")
	if v != "" && v == r.req.hdr[hdrCharge] {
		return r.req.charge
	}
	c, _ := strconv.ParseFloat(v, 64)
	return c
}

// Flush lets streamed responses through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// operationOf names a request's operation for metrics and logs as the
// access table does ("docs.read", "docs.query", "sprocs.execute"): its
// values are few, so that metrics stay small.
func operationOf(r *http.Request) string {
	if r.URL.Path == "/_health" {
		return "health"
	}
	op, _, err := classify(r, splitPath(r.URL.Path))
	if err != nil {
		return "unknown"
	}
	return op.String()
}
