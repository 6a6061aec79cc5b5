package server

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/storage/memory"
)

// newMeteredServer serves an engine with a settable clock, no TTL sweeper
// and scripts limited to 16 MiB (strings of 8 Mi characters), so that the
// memory-limit case is a 5 MB string doubled, quick beside the 5 s time
// budget even on a loaded machine (a 34 MB one outran a 2 s budget at load
// average 28), its /metrics on the port behind the master key, as
// cmd/orrery wires them.
func newMeteredServer(t *testing.T) (*rawClient, *atomic.Int64) {
	ctx := t.Context()
	t.Helper()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{
		Now:           func() time.Time { return time.Unix(0, clock.Load()) },
		SweepInterval: -1,
		ScriptLimits:  script.Limits{Timeout: 5 * time.Second, MaxMemory: 16 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewEngineCollector(eng))
	h, err := Observe(srv, ObserveOptions{Registerer: reg, Gatherer: reg, MetricsKey: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	return &rawClient{t: t, url: hs.URL, key: EmulatorKey}, &clock
}

// scrape reads /metrics and returns each sample by its name and labels as
// written, e.g. `orrery_ttl_backlog_items{container="c",database="db"}`.
func scrape(t *testing.T, c *rawClient) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", c.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	samples := map[string]float64{}
	help := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "# HELP "); ok {
			help[strings.Fields(name)[0]] = true
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
		name, _, _ := strings.Cut(line[:i], "{")
		if strings.HasPrefix(name, "orrery_") && !help[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] {
			t.Errorf("metric %s has no HELP text", name)
		}
	}
	return samples
}

// TestMetricsReportFeedLagTTLBacklogAndScriptOutcomes: after real requests
// (stored procedures that return, throw, loop past their budget and
// outgrow their memory, a
// trigger, a UDF in a query, items past their TTL that no sweep deleted,
// changes written after a change-feed reader's last page), /metrics reports
// each figure as it stands.
func TestMetricsReportFeedLagTTLBacklogAndScriptOutcomes(t *testing.T) {
	c, clock := newMeteredServer(t)
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"t","partitionKey":{"paths":["/pk"]},"defaultTtl":60}`, nil, 201)

	// Scripts: two that return, one that throws, one that loops, one that
	// asks for more memory than a run may have.
	c.must("POST", "/dbs/db/colls/c/sprocs", `{"id":"ok","body":"function () { getContext().getResponse().setBody(1); }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/sprocs", `{"id":"throws","body":"function () { throw new Error('no'); }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/sprocs", `{"id":"loops","body":"function () { while (true) {} }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/sprocs", `{"id":"hog","body":"function () { var s = 'x'.repeat(5000000); s = s + s; getContext().getResponse().setBody(s.length); }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/triggers", `{"id":"stamp","triggerType":"Pre","triggerOperation":"All","body":"function () { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/udfs", `{"id":"double","body":"function (x) { return 2 * x; }"}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/sprocs/ok", `[]`, pk(`["a"]`), 200)
	c.must("POST", "/dbs/db/colls/c/sprocs/ok", `[]`, pk(`["a"]`), 200)
	c.must("POST", "/dbs/db/colls/c/sprocs/throws", `[]`, pk(`["a"]`), 400)
	c.must("POST", "/dbs/db/colls/c/sprocs/loops", `[]`, pk(`["a"]`), 408)
	c.must("POST", "/dbs/db/colls/c/sprocs/hog", `[]`, pk(`["a"]`), 400)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a","n":1}`,
		map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-documentdb-pre-trigger-include": "stamp"}, 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"query":"SELECT VALUE udf.double(c.n) FROM c"}`,
		map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"}, 200)

	// The change feed: a reader reads everything, then two items change
	// and two minutes pass.
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"2","pk":"b"}`, pk(`["b"]`), 201)
	feed := func(etag string) response {
		h := map[string]string{"A-IM": "Incremental Feed"}
		if etag != "" {
			h["If-None-Match"] = etag
		}
		return c.do("GET", "/dbs/db/colls/c/docs", "", h)
	}
	etag := ""
	for {
		r := feed(etag)
		etag = r.header.Get("etag")
		if r.status == 304 {
			break
		}
	}
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"3","pk":"b"}`, pk(`["b"]`), 201)
	c.must("PUT", "/dbs/db/colls/c/docs/2", `{"id":"2","pk":"b","v":2}`, pk(`["b"]`), 200)
	advance(2 * time.Minute)

	// TTL: three items expire; no sweeper runs.
	for _, id := range []string{"x", "y", "z"} {
		c.must("POST", "/dbs/db/colls/t/docs", `{"id":"`+id+`","pk":"`+id+`"}`, pk(`["`+id+`"]`), 201)
	}
	c.must("POST", "/dbs/db/colls/t/docs", `{"id":"keep","pk":"k","ttl":-1}`, pk(`["k"]`), 201)
	advance(61 * time.Second) // the oldest unread change is now 181 s old

	m := scrape(t, c)
	want := map[string]float64{
		`orrery_script_runs_total{kind="sproc",outcome="ok"}`:                2,
		`orrery_script_runs_total{kind="sproc",outcome="error"}`:             1,
		`orrery_script_runs_total{kind="sproc",outcome="timeout"}`:           1,
		`orrery_script_runs_total{kind="trigger",outcome="ok"}`:              1,
		`orrery_script_runs_total{kind="udf",outcome="ok"}`:                  1,
		`orrery_scripts_running`:                                             0,
		`orrery_scripts_waiting`:                                             0,
		`orrery_changefeed_lag_changes{container="c",database="db"}`:         2,
		`orrery_changefeed_lag_seconds{container="c",database="db"}`:         120 + 61,
		`orrery_changefeed_unpublished_changes{container="c",database="db"}`: 0,
		`orrery_changefeed_read_lsn{container="c",database="db"}`:            parseETag(t, etag),
		`orrery_ttl_backlog_items{container="t",database="db"}`:              3,
		`orrery_ttl_swept_items_total`:                                       0,
		`orrery_writes_in_flight`:                                            0,
		`orrery_requests_total{operation="sprocs.execute",status="408"}`:     1,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("%s missing", k)
		} else if got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if _, ok := m[`orrery_changefeed_read_lsn{container="t",database="db"}`]; ok {
		t.Error("a container no change-feed reader read reports a read position")
	}
	if _, ok := m[`orrery_ttl_backlog_items{container="c",database="db"}`]; ok {
		t.Error("a container without TTL reports a TTL backlog")
	}
	if m[`orrery_changefeed_watermark_lsn`] != m[`orrery_lsn_newest`] || m[`orrery_changefeed_newest_lsn{container="t",database="db"}`] > m[`orrery_lsn_newest`] {
		t.Errorf("at rest the watermark %v is not the newest LSN %v (container t's newest %v)",
			m[`orrery_changefeed_watermark_lsn`], m[`orrery_lsn_newest`], m[`orrery_changefeed_newest_lsn{container="t",database="db"}`])
	}

	// The reader catches up: no lag.
	for {
		r := feed(etag)
		etag = r.header.Get("etag")
		if r.status == 304 {
			break
		}
	}
	if m = scrape(t, c); m[`orrery_changefeed_lag_changes{container="c",database="db"}`] != 0 || m[`orrery_changefeed_lag_seconds{container="c",database="db"}`] != 0 {
		t.Errorf("after the reader caught up: lag %v changes, %v s", m[`orrery_changefeed_lag_changes{container="c",database="db"}`], m[`orrery_changefeed_lag_seconds{container="c",database="db"}`])
	}
}

func parseETag(t *testing.T, etag string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.Trim(etag, `"`), 64)
	if err != nil {
		t.Fatalf("etag %q: %v", etag, err)
	}
	return v
}
