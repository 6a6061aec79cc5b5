package server

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// queryMetricsHeader renders a page's measured metrics the way the service
// writes x-ms-documentdb-query-metrics: name=value pairs separated by
// semicolons, times in milliseconds with two decimals. Phases Orrery does
// not have apart (plan building and optimization are part of compiling; no
// system or user function time is kept apart from evaluation) are left out
// rather than reported as measured. The Go SDK asks for it with every
// query: it is written into one buffer, the string made once.
func queryMetricsHeader(m *engine.QueryMetrics) string {
	var buf [320]byte
	return string(appendQueryMetrics(buf[:0], m))
}

// appendQueryMetrics appends the value of queryMetricsHeader to b.
func appendQueryMetrics(b []byte, m *engine.QueryMetrics) []byte {
	ms := func(b []byte, name string, d time.Duration) []byte {
		b = append(append(b, name...), '=')
		return strconv.AppendFloat(b, float64(d)/float64(time.Millisecond), 'f', 2, 64)
	}
	count := func(b []byte, name string, n int64) []byte {
		b = append(append(b, name...), '=')
		return strconv.AppendInt(b, n, 10)
	}
	ratio := 0.0
	if m.RetrievedDocumentCount > 0 {
		ratio = float64(m.IndexHitDocumentCount) / float64(m.RetrievedDocumentCount)
	}
	b = ms(b, "totalExecutionTimeInMs", m.TotalExecutionTime)
	b = ms(append(b, ';'), "queryCompileTimeInMs", m.CompileTime)
	b = ms(append(b, ';'), "VMExecutionTimeInMs", m.VMExecutionTime)
	b = ms(append(b, ';'), "indexLookupTimeInMs", m.IndexLookupTime)
	b = ms(append(b, ';'), "documentLoadTimeInMs", m.DocumentLoadTime)
	b = count(append(b, ';'), "retrievedDocumentCount", m.RetrievedDocumentCount)
	b = count(append(b, ';'), "retrievedDocumentSize", m.RetrievedDocumentSize)
	b = count(append(b, ';'), "outputDocumentCount", m.OutputDocumentCount)
	b = count(append(b, ';'), "outputDocumentSize", m.OutputDocumentSize)
	b = append(b, ";indexUtilizationRatio="...)
	return strconv.AppendFloat(b, ratio, 'f', 2, 64)
}

// indexUtilizationJSON is the service's index metrics document.
func indexUtilizationJSON(u *engine.IndexUtilization) []byte {
	type single struct {
		FilterExpression string
		IndexSpec        string
		FilterPreciseSet bool
		IndexPreciseSet  bool
		IndexImpactScore string
	}
	type composite struct {
		IndexSpecs       []string
		IndexPreciseSet  bool
		IndexImpactScore string
	}
	singles := func(list []engine.IndexUse) []single {
		out := make([]single, 0, len(list))
		for _, s := range list {
			out = append(out, single{FilterExpression: s.Filter, IndexSpec: s.Spec, FilterPreciseSet: true, IndexPreciseSet: true, IndexImpactScore: "High"})
		}
		return out
	}
	comps := make([]composite, 0, len(u.PotentialComposite))
	for _, c := range u.PotentialComposite {
		comps = append(comps, composite{IndexSpecs: c.Specs, IndexPreciseSet: true, IndexImpactScore: "High"})
	}
	doc, _ := json.Marshal(struct {
		UtilizedSingleIndexes     []single
		PotentialSingleIndexes    []single
		UtilizedCompositeIndexes  []composite
		PotentialCompositeIndexes []composite
	}{singles(u.UtilizedSingle), singles(u.PotentialSingle), []composite{}, comps})
	return doc
}

// setQueryMetricsHeaders writes the metrics headers a query request asked
// for: query metrics when x-ms-documentdb-populatequerymetrics is true;
// index utilization, base64 JSON, when x-ms-cosmos-populateindexmetrics is
// true, or URL-encoded JSON when x-ms-cosmos-populateindexmetrics-V2 is.
func (r *request) setQueryMetricsHeaders(res *engine.QueryResult) {
	h := r.w.Header()
	if res.Metrics != nil && strings.EqualFold(header(r.Header, "X-Ms-Documentdb-Populatequerymetrics"), "true") {
		r.setHeader("X-Ms-Documentdb-Query-Metrics", hdrQueryMetrics, queryMetricsHeader(res.Metrics))
	}
	if res.IndexUtilization == nil {
		return
	}
	doc := indexUtilizationJSON(res.IndexUtilization)
	if wantsIndexMetricsV2(r) {
		h.Set("X-Ms-Cosmos-Index-Utilization", strings.ReplaceAll(url.QueryEscape(string(doc)), "+", "%20"))
	} else {
		h.Set("X-Ms-Cosmos-Index-Utilization", base64.StdEncoding.EncodeToString(doc))
	}
}

// wantsIndexMetrics reports whether the request asked for index metrics.
func wantsIndexMetrics(r *request) bool {
	return strings.EqualFold(header(r.Header, "X-Ms-Cosmos-Populateindexmetrics"), "true") || wantsIndexMetricsV2(r)
}

func wantsIndexMetricsV2(r *request) bool {
	return strings.EqualFold(header(r.Header, "X-Ms-Cosmos-Populateindexmetrics-V2"), "true")
}
