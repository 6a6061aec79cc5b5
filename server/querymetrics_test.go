package server

import (
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// queryMetricsHeaderPairByPair is x-ms-documentdb-query-metrics as it was
// written before it was appended into one buffer: each value formatted on
// its own, the pairs joined with a strings.Builder.
func queryMetricsHeaderPairByPair(m *engine.QueryMetrics) string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
	}
	ratio := 0.0
	if m.RetrievedDocumentCount > 0 {
		ratio = float64(m.IndexHitDocumentCount) / float64(m.RetrievedDocumentCount)
	}
	var b strings.Builder
	pairs := []struct{ k, v string }{
		{"totalExecutionTimeInMs", ms(m.TotalExecutionTime)},
		{"queryCompileTimeInMs", ms(m.CompileTime)},
		{"VMExecutionTimeInMs", ms(m.VMExecutionTime)},
		{"indexLookupTimeInMs", ms(m.IndexLookupTime)},
		{"documentLoadTimeInMs", ms(m.DocumentLoadTime)},
		{"retrievedDocumentCount", strconv.FormatInt(m.RetrievedDocumentCount, 10)},
		{"retrievedDocumentSize", strconv.FormatInt(m.RetrievedDocumentSize, 10)},
		{"outputDocumentCount", strconv.FormatInt(m.OutputDocumentCount, 10)},
		{"outputDocumentSize", strconv.FormatInt(m.OutputDocumentSize, 10)},
		{"indexUtilizationRatio", strconv.FormatFloat(ratio, 'f', 2, 64)},
	}
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// TestQueryMetricsHeaderIsWhatEachPairFormattedOnItsOwnGave: the query
// metrics header, appended into one buffer, is byte for byte the pairs
// formatted one by one and joined, for zero, small, large, negative and
// random figures (the buffer's size passed too).
func TestQueryMetricsHeaderIsWhatEachPairFormattedOnItsOwnGave(t *testing.T) {
	cases := []engine.QueryMetrics{
		{},
		{TotalExecutionTime: 1, CompileTime: 4999, VMExecutionTime: 5000, IndexLookupTime: 5001, DocumentLoadTime: 1234567,
			RetrievedDocumentCount: 3, IndexHitDocumentCount: 1, RetrievedDocumentSize: 1024, OutputDocumentCount: 1, OutputDocumentSize: 99},
		{TotalExecutionTime: math.MaxInt64, CompileTime: math.MinInt64, VMExecutionTime: -1, IndexLookupTime: -5000, DocumentLoadTime: math.MaxInt64,
			RetrievedDocumentCount: math.MaxInt64, IndexHitDocumentCount: math.MaxInt64, RetrievedDocumentSize: math.MinInt64,
			OutputDocumentCount: math.MinInt64, OutputDocumentSize: math.MaxInt64},
		{RetrievedDocumentCount: 3, IndexHitDocumentCount: 2},
		{RetrievedDocumentCount: -3, IndexHitDocumentCount: 2},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		d := func() time.Duration {
			switch r.IntN(3) {
			case 0:
				return time.Duration(r.Int64N(int64(time.Second)))
			case 1:
				return time.Duration(r.Int64())
			}
			return time.Duration(r.Int64N(100_000))
		}
		n := func() int64 {
			if r.IntN(2) == 0 {
				return r.Int64N(1000)
			}
			return r.Int64()
		}
		cases = append(cases, engine.QueryMetrics{TotalExecutionTime: d(), CompileTime: d(), VMExecutionTime: d(), IndexLookupTime: d(), DocumentLoadTime: d(),
			RetrievedDocumentCount: n(), IndexHitDocumentCount: n(), RetrievedDocumentSize: n(), OutputDocumentCount: n(), OutputDocumentSize: n()})
	}
	for _, m := range cases {
		if got, want := queryMetricsHeader(&m), queryMetricsHeaderPairByPair(&m); got != want {
			t.Fatalf("metrics %+v:\n got %s\nwant %s", m, got, want)
		}
	}
}

// TestAQueryPagesMetricsHeaderIsHeldInTheRequest holds the metrics header
// a query page answers with (the Go SDK asks for it on every page): the
// page's metrics as queryMetricsHeader formats them, set when asked and
// only then, its value held in the request, so that setting it costs only
// the formatted text.
func TestAQueryPagesMetricsHeaderIsHeldInTheRequest(t *testing.T) {
	m := &engine.QueryMetrics{RetrievedDocumentCount: 3, RetrievedDocumentSize: 900, OutputDocumentCount: 1,
		OutputDocumentSize: 300, IndexHitDocumentCount: 1, IndexLookups: 2, TotalExecutionTime: 1234567, CompileTime: 2345}
	res := &engine.QueryResult{Metrics: m}
	for _, asked := range []string{"true", "True", "false", ""} {
		w := httptest.NewRecorder()
		hr := httptest.NewRequest("POST", "/dbs/d/colls/c/docs", nil)
		if asked != "" {
			hr.Header.Set("X-Ms-Documentdb-Populatequerymetrics", asked)
		}
		r := &request{Request: hr, w: w}
		r.setQueryMetricsHeaders(res)
		got, set := w.Header()["X-Ms-Documentdb-Query-Metrics"]
		if want := strings.EqualFold(asked, "true"); set != want {
			t.Fatalf("asked %q: header set %v, want %v", asked, set, want)
		}
		if !set {
			continue
		}
		if len(got) != 1 || got[0] != queryMetricsHeader(m) {
			t.Fatalf("header %q, want [%q]", got, queryMetricsHeader(m))
		}
		if n := testing.AllocsPerRun(100, func() { r.setQueryMetricsHeaders(res) }); n != 1 {
			t.Errorf("setting the header took %v allocations, want 1 (its text)", n)
		}
	}
}
