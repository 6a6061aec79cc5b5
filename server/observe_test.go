package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/memory"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newObservedServer(t *testing.T) (*rawClient, *prometheus.Registry, *syncBuffer) {
	ctx := t.Context()
	t.Helper()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	h, err := Observe(srv, ObserveOptions{Registerer: reg, Gatherer: reg, MetricsKey: EmulatorKey, AccessLog: slog.New(NewTextLogHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	return &rawClient{t: t, url: hs.URL, key: EmulatorKey}, reg, logs
}

// TestEveryRequestIsCountedTimedAndLogged: each request adds to the counter
// of its operation and status, to its latency histogram and charge, and
// writes one access log line with its status, substatus and activity id.
func TestEveryRequestIsCountedTimedAndLogged(t *testing.T) {
	c, reg, logs := newObservedServer(t)
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 409)
	c.must("GET", "/dbs/db/colls/c/docs/1", "", pk(`["a"]`), 200)
	c.must("GET", "/dbs/db/colls/c/docs/2", "", pk(`["a"]`), 404)
	read := c.must("GET", "/dbs/db/colls/c/docs/1", "", pk(`["a"]`), 200)

	want := map[[2]string]float64{
		{"dbs.create", "201"}: 1, {"colls.create", "201"}: 1, {"docs.create", "201"}: 1,
		{"docs.create", "409"}: 1, {"docs.read", "200"}: 2, {"docs.read", "404"}: 1,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"orrery_requests_total", "orrery_request_duration_seconds", "orrery_request_charge_total"} {
		if !found[name] {
			t.Errorf("metric %s missing", name)
		}
	}
	for labels, n := range want {
		got := testutil.ToFloat64(counterOf(t, reg, "orrery_requests_total", labels[0], labels[1]))
		if got != n {
			t.Errorf("orrery_requests_total{operation=%q,status=%q} = %v, want %v", labels[0], labels[1], got, n)
		}
	}

	log := logs.String()
	activity := read.header.Get("x-ms-activity-id")
	if activity == "" || !strings.Contains(log, "activity="+activity) {
		t.Errorf("no access log line carries the read's activity id %q:\n%s", activity, log)
	}
	if n := strings.Count(log, "msg=request"); n != 7 {
		t.Errorf("%d access log lines for 7 requests", n)
	}
	if !strings.Contains(log, "op=docs.create status=409") {
		t.Errorf("the conflict's line is missing:\n%s", log)
	}
}

// counterOf finds one counter of a vector in the registry by its labels.
func counterOf(t *testing.T, reg *prometheus.Registry, name, op, status string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["status"] == status {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return 0 })
}

// TestMetricsNeedTheMasterKey: /metrics on the main port answers only to
// the master key as a bearer token.
func TestMetricsNeedTheMasterKey(t *testing.T) {
	c, _, _ := newObservedServer(t)
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	for _, auth := range []string{"", "Bearer wrong", EmulatorKey} {
		req, _ := http.NewRequest("GET", c.url+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("/metrics with Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", c.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+EmulatorKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "orrery_requests_total") {
		t.Fatalf("/metrics with the key: %d\n%.300s", resp.StatusCode, body)
	}
}

// Observe on a registry that has its metrics already fails with an error
// instead of panicking.
func TestObserveOnARegistryThatHasItsMetricsFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := http.NotFoundHandler()
	if _, err := Observe(h, ObserveOptions{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := Observe(h, ObserveOptions{Registerer: reg}); err == nil {
		t.Fatal("a second Observe on one registry succeeded, want an error")
	}
}

// TestProfilesNeedTheMasterKey: with PprofKey the runtime profiles answer
// only to the master key as a bearer token; anyone else, a client signing
// with the key as the SDKs do included, gets Cosmos's 401, and without
// PprofKey there are no profiles at all.
func TestProfilesNeedTheMasterKey(t *testing.T) {
	store := memory.New()
	eng, err := engine.Open(t.Context(), store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	with, err := Observe(srv, ObserveOptions{PprofKey: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	without, err := Observe(srv, ObserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hs, hsOff := httptest.NewServer(with), httptest.NewServer(without)
	t.Cleanup(func() { hs.Close(); hsOff.Close(); eng.Close(); store.Close() })
	get := func(base, path, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	signed, err := Sign(EmulatorKey, "GET", "", "", time.Now().UTC().Format(http.TimeFormat))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		for _, auth := range []string{"", "Bearer wrong", EmulatorKey, signed} {
			status, body := get(hs.URL, path, auth)
			if status != 401 || !strings.Contains(body, `"code":"Unauthorized"`) {
				t.Errorf("%s with Authorization %q: %d %s, want Cosmos's 401", path, auth, status, body)
			}
		}
	}
	status, body := get(hs.URL, "/debug/pprof/heap?debug=1", "Bearer "+EmulatorKey)
	if status != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile with the master key: %d %.200s", status, body)
	}
	if status, body := get(hsOff.URL, "/debug/pprof/heap?debug=1", "Bearer "+EmulatorKey); status == 200 || strings.Contains(body, "heap profile") {
		t.Errorf("heap profile without PprofKey: %d %.200s, want no profile", status, body)
	}
}

// TestTracingOffCostsARequestNothing: without ObserveOptions.Trace the
// observer hands the server the request as it came (no trace context
// extracted, no span, no copy of the request); with it, a context of its
// own.
func TestTracingOffCostsARequestNothing(t *testing.T) {
	for _, on := range []bool{false, true} {
		var seen *http.Request
		h, err := Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r }), ObserveOptions{Trace: on})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/dbs/db", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
		if same := seen == r; same == on {
			t.Errorf("Trace %v: the server got the caller's request: %v", on, same)
		}
	}
}

// TestObservedRequestsCheckTheirDateByTheServersClock: behind Observe, a
// request's x-ms-date is checked against the server's clock (Config.Now)
// when it has one of its own, and against the time the request came with
// the real one: a date within the allowed skew of it is accepted, one
// outside refused.
func TestObservedRequestsCheckTheirDateByTheServersClock(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); store.Close() })
	if _, err := eng.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	get := func(h http.Handler, date time.Time) int {
		d := date.UTC().Format(http.TimeFormat)
		auth, _ := Sign(EmulatorKey, "GET", "dbs", "dbs/db", d)
		r := httptest.NewRequest("GET", "/dbs/db", nil)
		r.Header.Set("X-Ms-Date", d)
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Ms-Version", "2020-07-15")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		name string
		now  func() time.Time
		date time.Time
		want int
	}{
		{"its own clock, its date", func() time.Time { return past }, past, 200},
		{"its own clock, the real date", func() time.Time { return past }, time.Now(), 401},
		{"the real clock, the real date", nil, time.Now(), 200},
		{"the real clock, a date past the skew", nil, past, 401},
	} {
		srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Now: tc.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		h, err := Observe(srv, ObserveOptions{Registerer: prometheus.NewRegistry(), AccessLog: slog.New(NewTextLogHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(h, tc.date); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestEachRequestIsChargedInMetricsAndLogAsItsHeaderSays: the charge an
// answer's x-ms-request-charge header carries (item writes and reads of
// sizes the engine charges differently, patches, queries, 404s and 409s)
// is, parsed, the charge its access log line writes and what it adds to
// orrery_request_charge_total: the observer takes the charge writeJSON
// formatted without parsing the header back, and item charges' texts come
// from a cache.
func TestEachRequestIsChargedInMetricsAndLogAsItsHeaderSays(t *testing.T) {
	c, reg, logs := newObservedServer(t)
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	var answers []response
	sum := map[string]float64{}
	note := func(op string, r response) {
		answers = append(answers, r)
		v, err := strconv.ParseFloat(r.header.Get("X-Ms-Request-Charge"), 64)
		if err != nil {
			t.Fatalf("%s: charge %q: %v", op, r.header.Get("X-Ms-Request-Charge"), err)
		}
		sum[op] += v
	}
	for i := range 12 {
		body := fmt.Sprintf(`{"id":"i%d","pk":"a","pad":%q,"n":0}`, i%4, strings.Repeat("x", i*700))
		note("docs.upsert", c.must("POST", "/dbs/db/colls/c/docs", body, map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-documentdb-is-upsert": "true"}, map[bool]int{true: 201, false: 200}[i < 4]))
		note("docs.read", c.must("GET", fmt.Sprintf("/dbs/db/colls/c/docs/i%d", i%4), "", pk(`["a"]`), 200))
		note("docs.replace", c.must("PUT", fmt.Sprintf("/dbs/db/colls/c/docs/i%d", i%4), body, pk(`["a"]`), 200))
		note("docs.patch", c.must("PATCH", fmt.Sprintf("/dbs/db/colls/c/docs/i%d", i%4), `{"operations":[{"op":"incr","path":"/n","value":1}]}`, pk(`["a"]`), 200))
		note("docs.query", c.must("POST", "/dbs/db/colls/c/docs", `{"query":"SELECT * FROM c WHERE c.n > 0"}`,
			map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "content-type": "application/query+json", "x-ms-documentdb-isquery": "true"}, 200))
		note("docs.read", c.must("GET", "/dbs/db/colls/c/docs/none", "", pk(`["a"]`), 404))
		note("docs.create", c.must("POST", "/dbs/db/colls/c/docs", body, pk(`["a"]`), 409))
	}
	lines := strings.Split(logs.String(), "\n")
	for _, r := range answers {
		activity := r.header.Get("X-Ms-Activity-Id")
		v, _ := strconv.ParseFloat(r.header.Get("X-Ms-Request-Charge"), 64)
		want := "charge=" + strconv.FormatFloat(v, 'g', -1, 64) + " "
		found := false
		for _, l := range lines {
			if strings.Contains(l, "activity="+activity) {
				found = true
				if !strings.Contains(l, want) {
					t.Errorf("the line of the answer charged %q does not say %s:\n%s", r.header.Get("X-Ms-Request-Charge"), want, l)
				}
			}
		}
		if !found {
			t.Errorf("no access log line for activity %s", activity)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "orrery_request_charge_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	for op, want := range sum {
		if math.Abs(got[op]-want) > 1e-9*want {
			t.Errorf("orrery_request_charge_total{operation=%q} = %v, the answers' headers add to %v", op, got[op], want)
		}
	}
}

// TestAnItemChargesTextIsFormatCharges: itemChargeText gives formatCharge's
// text for every charge, the first time and from its cache, whatever
// charges share a slot, and from goroutines at once.
func TestAnItemChargesTextIsFormatCharges(t *testing.T) {
	charges := []float64{0, 1, 1.1, 5.71, 6.09, 6.47, 2.38, 0.1 + 0.2, 1e21, 1e-7, 123456789.125, math.Inf(1), math.Inf(-1), math.Copysign(0, -1), -0.5, math.MaxFloat64, math.SmallestNonzeroFloat64}
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		charges = append(charges, 5.71+float64(r.IntN(200))*0.38, 1+float64(r.IntN(200))*0.1, r.Float64()*100, math.Float64frombits(r.Uint64()))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i := range charges {
					c := charges[(i*(g+1)+round)%len(charges)]
					if got, want := itemChargeText(c), formatCharge(c); got != want {
						t.Errorf("itemChargeText(%v) = %q, want %q", c, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
