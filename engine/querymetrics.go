package engine

import (
	"encoding/json"

	"time"

	"github.com/orrery-db/orrery/query"
)

// QueryMetrics is what one page of a query cost, measured while it ran: the
// service reports the same figures in x-ms-documentdb-query-metrics.
type QueryMetrics struct {
	// RetrievedDocumentCount and RetrievedDocumentSize count the documents
	// loaded from storage (and their stored bytes), expired ones included.
	RetrievedDocumentCount int64
	RetrievedDocumentSize  int64
	// OutputDocumentCount and OutputDocumentSize count the page's results.
	OutputDocumentCount int64
	OutputDocumentSize  int64
	// IndexHitDocumentCount counts the retrieved rows that satisfied the
	// WHERE clause: with a precise index it equals RetrievedDocumentCount.
	IndexHitDocumentCount int64
	// IndexLookups counts the index (and order index) entries read.
	IndexLookups int64
	// TotalExecutionTime is the page's whole time in the engine;
	// CompileTime parsing and planning; IndexLookupTime walking index
	// entries; DocumentLoadTime reading and decoding documents;
	// VMExecutionTime the rest, evaluating the query on them.
	TotalExecutionTime time.Duration
	CompileTime        time.Duration
	IndexLookupTime    time.Duration
	DocumentLoadTime   time.Duration
	VMExecutionTime    time.Duration
}

// IndexUtilization says which indexes a query used and which it would have
// used had the indexing policy had them.
type IndexUtilization struct {
	UtilizedSingle     []IndexUse
	PotentialSingle    []IndexUse
	PotentialComposite []CompositeIndexUse
}

// IndexUse is one single-path index a query used or lacked: its path spec
// ("/a/?") and the filter or ORDER BY it serves.
type IndexUse struct {
	Spec   string
	Filter string
}

// CompositeIndexUse is a composite index an ORDER BY on several paths
// would need: one "path ASC|DESC" spec per key.
type CompositeIndexUse struct {
	Specs []string
}

// charge is the request charge of a page from what it measured: a base, the
// documents loaded and their bytes, the index entries read and the bytes
// returned. Never zero.
func (m *QueryMetrics) charge() float64 {
	// A 100-item page of 1 KB items read by a scan comes to about 10 RU,
	// one item found by an index lookup to about 2.4, as in the service.
	return 2.3 + float64(m.RetrievedDocumentCount)*0.01 + float64(m.RetrievedDocumentSize)/1024*0.02 +
		float64(m.IndexLookups)*0.005 + float64(m.OutputDocumentSize)/1024*0.05
}

// finish completes the metrics of a page that started at start and returned
// items.
func (m *QueryMetrics) finish(start time.Time, items []json.RawMessage, x *query.Execution) {
	m.TotalExecutionTime = time.Since(start)
	m.OutputDocumentCount = int64(len(items))
	for _, it := range items {
		m.OutputDocumentSize += int64(len(it))
	}
	if x != nil {
		m.IndexHitDocumentCount = min(x.Matched(), m.RetrievedDocumentCount)
	}
	m.VMExecutionTime = max(0, m.TotalExecutionTime-m.CompileTime-m.IndexLookupTime-m.DocumentLoadTime)
}
