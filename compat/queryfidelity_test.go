package compat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// parseQueryMetrics parses x-ms-documentdb-query-metrics as the SDKs do:
// name=value pairs separated by semicolons, every value a number.
func parseQueryMetrics(t *testing.T, h *string) map[string]float64 {
	t.Helper()
	if h == nil {
		t.Fatal("the page has no query metrics (x-ms-documentdb-query-metrics)")
	}
	out := map[string]float64{}
	for _, part := range strings.Split(*h, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			t.Fatalf("query metrics %q: %q is not name=value", *h, part)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("query metrics %q: %s is not a number", *h, part)
		}
		out[k] = f
	}
	for _, k := range []string{"totalExecutionTimeInMs", "queryCompileTimeInMs", "indexLookupTimeInMs", "documentLoadTimeInMs",
		"VMExecutionTimeInMs", "retrievedDocumentCount", "retrievedDocumentSize", "outputDocumentCount", "outputDocumentSize", "indexUtilizationRatio"} {
		if _, ok := out[k]; !ok {
			t.Fatalf("query metrics %q lack %s", *h, k)
		}
	}
	return out
}

// metricsPage is one page of a query with what its metrics say.
type metricsPage struct {
	items   []json.RawMessage
	metrics map[string]float64
	charge  float32
	more    bool
	index   *string
}

func queryPages(t *testing.T, c *azcosmos.ContainerClient, q string, pk azcosmos.PartitionKey, opts *azcosmos.QueryOptions) ([]metricsPage, error) {
	t.Helper()
	pager := c.NewQueryItemsPager(q, pk, opts)
	var pages []metricsPage
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			return pages, err
		}
		p := metricsPage{metrics: parseQueryMetrics(t, page.QueryMetrics), charge: page.RequestCharge,
			more: page.ContinuationToken != nil, index: page.IndexMetrics}
		for _, it := range page.Items {
			p.items = append(p.items, it)
		}
		pages = append(pages, p)
	}
	return pages, nil
}

func idsOf(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var ids []string
	for _, it := range items {
		var d struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it, &d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	return ids
}

// TestGoSDKQueryMetricsCountWhatEachPageLoadsAndReturns checks that every
// page carries the query metrics and that their counts are the true ones:
// a scan loads every item of the partition once, an index lookup only the
// items it matches, and the output figures are the page's own.
func TestGoSDKQueryMetricsCountWhatEachPageLoadsAndReturns(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "metrics", "/pk")
	ctx := context.Background()
	for i := range 30 {
		doc := fmt.Sprintf(`{"id":"a%02d","pk":"a","n":%d,"pad":%q}`, i, i, strings.Repeat("x", i*10))
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("a"), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		doc := fmt.Sprintf(`{"id":"b%02d","pk":"b","n":%d}`, i, i)
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("b"), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
	a := azcosmos.NewPartitionKeyString("a")
	all, _, err := queryAll(t, c, "SELECT * FROM c", a, 0)
	if err != nil || len(all) != 30 {
		t.Fatalf("partition a: %d items, %v", len(all), err)
	}
	storedSize := 0
	for _, it := range all {
		storedSize += len(it)
	}

	// A filter no index serves: the scan loads the 30 items of the
	// partition once over all pages, and the filter keeps half of them.
	pages, err := queryPages(t, c, "SELECT * FROM c WHERE c.n % 2 = 0", a, &azcosmos.QueryOptions{PageSizeHint: 4})
	if err != nil {
		t.Fatal(err)
	}
	var retrieved, retrievedSize, output float64
	for i, p := range pages {
		m := p.metrics
		if int(m["outputDocumentCount"]) != len(p.items) {
			t.Errorf("page %d: outputDocumentCount %v, the page has %d items", i, m["outputDocumentCount"], len(p.items))
		}
		size := 0
		for _, it := range p.items {
			size += len(it)
		}
		if int(m["outputDocumentSize"]) != size {
			t.Errorf("page %d: outputDocumentSize %v, the page's items are %d bytes", i, m["outputDocumentSize"], size)
		}
		if p.charge <= 0 {
			t.Errorf("page %d: request charge %v", i, p.charge)
		}
		if m["totalExecutionTimeInMs"] < m["documentLoadTimeInMs"] || m["totalExecutionTimeInMs"] < m["queryCompileTimeInMs"] {
			t.Errorf("page %d: the total time is less than a phase: %v", i, m)
		}
		if len(p.items) > 4 {
			t.Errorf("page %d: %d items for a page size hint of 4", i, len(p.items))
		}
		if i < len(pages)-1 && (!p.more || len(p.items) != 4) {
			t.Errorf("page %d of %d: %d items, continuation %v", i, len(pages), len(p.items), p.more)
		}
		retrieved += m["retrievedDocumentCount"]
		retrievedSize += m["retrievedDocumentSize"]
		output += m["outputDocumentCount"]
	}
	if output != 15 {
		t.Errorf("outputDocumentCount over all pages %v, want 15", output)
	}
	// A page ends after its last row, so the scan may load the next item
	// twice (once to find the page full); never fewer than all 30.
	if retrieved < 30 || retrieved > 30+float64(len(pages)) {
		t.Errorf("retrievedDocumentCount over all pages %v, want the partition's 30 items (plus at most one per page)", retrieved)
	}
	if retrievedSize < float64(storedSize) {
		t.Errorf("retrievedDocumentSize over all pages %v, the partition's items are %d bytes", retrievedSize, storedSize)
	}

	// One page: the whole scan and the hit ratio of the filter.
	pages, err = queryPages(t, c, "SELECT * FROM c WHERE c.n % 2 = 0", a, &azcosmos.QueryOptions{PageSizeHint: 100})
	if err != nil || len(pages) != 1 {
		t.Fatalf("one page: %d pages, %v", len(pages), err)
	}
	if m := pages[0].metrics; m["retrievedDocumentCount"] != 30 || m["retrievedDocumentSize"] != float64(storedSize) ||
		m["outputDocumentCount"] != 15 || m["indexUtilizationRatio"] != 0.5 {
		t.Errorf("scan of 30 items keeping 15: metrics %v (stored size %d)", m, storedSize)
	}

	// An equality the index serves loads only the matching item.
	pages, err = queryPages(t, c, "SELECT * FROM c WHERE c.n = 7", a, nil)
	if err != nil || len(pages) != 1 || len(pages[0].items) != 1 {
		t.Fatalf("index lookup: %v %v", pages, err)
	}
	if m := pages[0].metrics; m["retrievedDocumentCount"] != 1 || m["outputDocumentCount"] != 1 || m["indexUtilizationRatio"] != 1 {
		t.Errorf("index lookup of one item: metrics %v", m)
	}

	// A query evaluated whole (ORDER BY) reports, on each page, what it did:
	// the first page loaded the partition, the next ones only page results.
	pages, err = queryPages(t, c, "SELECT * FROM c ORDER BY c.pad DESC", a, &azcosmos.QueryOptions{PageSizeHint: 10})
	if err != nil || len(pages) != 3 {
		t.Fatalf("ORDER BY: %d pages, %v", len(pages), err)
	}
	if m := pages[0].metrics; m["retrievedDocumentCount"] != 30 || m["outputDocumentCount"] != 10 {
		t.Errorf("ORDER BY first page: %v", m)
	}
	for i, p := range pages[1:] {
		if p.metrics["retrievedDocumentCount"] != 0 || p.metrics["outputDocumentCount"] != 10 || p.charge <= 0 {
			t.Errorf("ORDER BY page %d, served from the first page's evaluation: %v charge %v", i+1, p.metrics, p.charge)
		}
	}
}

// indexUtilization is the decoded x-ms-cosmos-index-utilization header.
type indexUtilization struct {
	UtilizedSingleIndexes     []struct{ IndexSpec, FilterExpression string }
	PotentialSingleIndexes    []struct{ IndexSpec, FilterExpression string }
	UtilizedCompositeIndexes  []struct{ IndexSpecs []string }
	PotentialCompositeIndexes []struct{ IndexSpecs []string }
}

func decodeIndexUtilization(t *testing.T, h *string) indexUtilization {
	t.Helper()
	if h == nil {
		t.Fatal("no index metrics although PopulateIndexMetrics was set")
	}
	raw, err := base64.StdEncoding.DecodeString(*h)
	if err != nil {
		t.Fatalf("index metrics %q are not base64: %v", *h, err)
	}
	var u indexUtilization
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatalf("index metrics %s: %v", raw, err)
	}
	return u
}

func specsOf(list []struct{ IndexSpec, FilterExpression string }) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.IndexSpec)
	}
	return out
}

// TestGoSDKIndexMetricsSayWhichIndexTheQueryUsedAndWhichItLacked checks
// that index metrics come only when asked for, name the index the query
// used, and name as potential the filtered paths the policy leaves out.
func TestGoSDKIndexMetricsSayWhichIndexTheQueryUsedAndWhichItLacked(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Client.NewDatabase("db")
	policy := &azcosmos.IndexingPolicy{Automatic: true, IndexingMode: azcosmos.IndexingModeConsistent,
		IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}}, ExcludedPaths: []azcosmos.ExcludedPath{{Path: "/note/?"}}}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "ix",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}, IndexingPolicy: policy}, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewContainer("ix")
	pk := azcosmos.NewPartitionKeyString("p")
	for i := range 10 {
		if _, err := c.CreateItem(ctx, pk, []byte(fmt.Sprintf(`{"id":"%d","pk":"p","n":%d,"note":"n%d","m":%d}`, i, i, i, 10-i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Not asked: no header.
	pages, err := queryPages(t, c, "SELECT * FROM c WHERE c.n = 3", pk, nil)
	if err != nil || pages[0].index != nil {
		t.Fatalf("index metrics without PopulateIndexMetrics: %v %v", pages[0].index, err)
	}
	withIndex := &azcosmos.QueryOptions{PopulateIndexMetrics: true}

	pages, err = queryPages(t, c, `SELECT * FROM c WHERE c.n = 3 AND c.note = "n3"`, pk, withIndex)
	if err != nil || len(pages[0].items) != 1 {
		t.Fatalf("query: %v %v", pages, err)
	}
	u := decodeIndexUtilization(t, pages[0].index)
	if got := specsOf(u.UtilizedSingleIndexes); !slices.Equal(got, []string{"/n/?"}) {
		t.Errorf("utilized single indexes %v, want [/n/?]", got)
	}
	if got := specsOf(u.PotentialSingleIndexes); !slices.Equal(got, []string{"/note/?"}) {
		t.Errorf("potential single indexes %v, want [/note/?] (excluded by the policy)", got)
	}
	if pages[0].metrics["retrievedDocumentCount"] != 1 {
		t.Errorf("the /n/? index served the query, yet it loaded %v documents", pages[0].metrics["retrievedDocumentCount"])
	}

	// Only the unindexed path: a scan, no index used.
	pages, err = queryPages(t, c, `SELECT * FROM c WHERE c.note = "n3"`, pk, withIndex)
	if err != nil {
		t.Fatal(err)
	}
	u = decodeIndexUtilization(t, pages[0].index)
	if len(u.UtilizedSingleIndexes) != 0 || !slices.Equal(specsOf(u.PotentialSingleIndexes), []string{"/note/?"}) {
		t.Errorf("a filter on an excluded path: %+v", u)
	}
	if pages[0].metrics["retrievedDocumentCount"] != 10 {
		t.Errorf("a scan of 10 items loaded %v", pages[0].metrics["retrievedDocumentCount"])
	}

	// ORDER BY on two paths needs a composite index the container does not
	// have: the service refuses the query.
	if _, err = queryPages(t, c, `SELECT * FROM c ORDER BY c.n ASC, c.m DESC`, pk, withIndex); err == nil ||
		!strings.Contains(err.Error(), "does not have a corresponding composite index") {
		t.Errorf("ORDER BY c.n, c.m DESC without a composite index: %v, want the service's 400", err)
	}
}

// TestGoSDKPartitionKeyFilterMakesAQuerySinglePartition checks that a
// query sent without a partition key is served when its filter pins one
// logical partition (or, on a hierarchical key, a prefix), with ORDER BY,
// aggregates, TOP, DISTINCT and OFFSET, and that only a query that really
// spans partitions is refused with the 400 that asks for a query plan.
func TestGoSDKPartitionKeyFilterMakesAQuerySinglePartition(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "pinned", "/pk")
	for i := range 12 {
		pk := fmt.Sprint(i % 3)
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(`{"id":"%02d","pk":%q,"n":%d}`, 11-i, pk, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	none := azcosmos.NewPartitionKey()
	param := []azcosmos.QueryParameter{{Name: "@pk", Value: "1"}}
	cases := []struct {
		query  string
		params []azcosmos.QueryParameter
		want   string
	}{
		{`SELECT * FROM c WHERE c.pk = '1' ORDER BY c.id`, nil, `["01","04","07","10"]`},
		{`SELECT * FROM c WHERE c.pk = @pk ORDER BY c.id DESC`, param, `["10","07","04","01"]`},
		{`SELECT VALUE COUNT(1) FROM c WHERE c.pk = '1'`, nil, `[4]`},
		{`SELECT VALUE SUM(c.n) FROM c WHERE c.pk = @pk AND c.n > 1`, param, `[21]`},
		{`SELECT TOP 2 * FROM c WHERE c.pk = '1' ORDER BY c.n`, nil, `["10","07"]`},
		{`SELECT DISTINCT VALUE c.pk FROM c WHERE c.pk = '1'`, nil, `["1"]`},
		{`SELECT * FROM c WHERE c.pk = '1' ORDER BY c.n OFFSET 1 LIMIT 2`, nil, `["07","04"]`},
	}
	for _, tt := range cases {
		items, _, err := queryAllWith(t, c, tt.query, none, &azcosmos.QueryOptions{QueryParameters: tt.params, PageSizeHint: 3})
		if err != nil {
			t.Errorf("%s without a partition key: %v", tt.query, err)
			continue
		}
		got := string(mustJSON(t, resultValues(t, items)))
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.query, got, tt.want)
		}
	}
	for _, q := range []string{
		`SELECT * FROM c WHERE c.pk = '1' OR c.pk = '2' ORDER BY c.id`,
		`SELECT VALUE COUNT(1) FROM c WHERE c.pk > '0'`,
		`SELECT * FROM c WHERE c.pk IN ('1', '2') ORDER BY c.id`,
	} {
		_, _, err := queryAll(t, c, q, none, 0)
		if got := statusOf(t, err); got != http.StatusBadRequest {
			t.Errorf("%s spans partitions: status %d, want 400 asking for a query plan", q, got)
		}
	}

	// Hierarchical key: all paths pin one partition, a prefix its
	// partitions, a later path alone nothing.
	h := newContainer(t, s, "db", "tenants", "/tenant", "/user")
	for i, tu := range [][2]string{{"t1", "u1"}, {"t1", "u2"}, {"t2", "u1"}, {"t1", "u1"}, {"t2", "u2"}} {
		key := azcosmos.NewPartitionKeyString(tu[0]).AppendString(tu[1])
		if _, err := h.CreateItem(ctx, key, []byte(fmt.Sprintf(`{"id":"%d","tenant":%q,"user":%q}`, i, tu[0], tu[1])), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ query, want string }{
		{`SELECT * FROM c WHERE c.tenant = 't1' AND c.user = 'u1' ORDER BY c.id`, `["0","3"]`},
		{`SELECT * FROM c WHERE c.tenant = 't1' ORDER BY c.id DESC`, `["3","1","0"]`},
		{`SELECT VALUE COUNT(1) FROM c WHERE c.tenant = 't2'`, `[2]`},
	} {
		items, _, err := queryAll(t, h, tt.query, none, 0)
		if err != nil {
			t.Errorf("%s without a partition key: %v", tt.query, err)
			continue
		}
		if got := string(mustJSON(t, resultValues(t, items))); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.query, got, tt.want)
		}
	}
	if _, _, err := queryAll(t, h, `SELECT * FROM c WHERE c.user = 'u1' ORDER BY c.id`, none, 0); statusOf(t, err) != http.StatusBadRequest {
		t.Errorf("a filter on the second path only spans partitions: %v, want 400", err)
	}
}

func queryAllWith(t *testing.T, c *azcosmos.ContainerClient, q string, pk azcosmos.PartitionKey, opts *azcosmos.QueryOptions) ([]json.RawMessage, int, error) {
	t.Helper()
	pager := c.NewQueryItemsPager(q, pk, opts)
	var out []json.RawMessage
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			return nil, pages, err
		}
		pages++
		for _, it := range page.Items {
			out = append(out, it)
		}
	}
	return out, pages, nil
}

// resultValues renders results as their ids when they are documents, else
// as they are.
func resultValues(t *testing.T, items []json.RawMessage) []any {
	t.Helper()
	out := []any{}
	for _, it := range items {
		var v any
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatal(err)
		}
		if m, ok := v.(map[string]any); ok {
			v = m["id"]
		}
		out = append(out, v)
	}
	return out
}

// TestGoSDKQueryWithoutOrderByReturnsCreationOrder checks the order the
// service gives without ORDER BY: creation order, logical partitions
// interleaved across the container, a replaced item in its place, a
// deleted and re-created one at the end; within a partition the same,
// whether the partition key comes as a header or in the filter.
func TestGoSDKQueryWithoutOrderByReturnsCreationOrder(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "order", "/pk")
	var created []string
	create := func(id, pk string) {
		t.Helper()
		if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(`{"id":%q,"pk":%q,"kind":"t"}`, id, pk)), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"m", "c", "x", "a", "q", "b", "z", "k"} {
		pk := []string{"p1", "p2", "p3"}[i%3]
		create(id, pk)
		created = append(created, id+"@"+pk)
	}
	// A replace keeps its place; a delete and re-create goes to the end.
	if _, err := c.ReplaceItem(ctx, azcosmos.NewPartitionKeyString("p2"), "c", []byte(`{"id":"c","pk":"p2","kind":"t","v":2}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteItem(ctx, azcosmos.NewPartitionKeyString("p1"), "a", nil); err != nil {
		t.Fatal(err)
	}
	create("a", "p1")
	created = append(slices.DeleteFunc(created, func(s string) bool { return s == "a@p1" }), "a@p1")

	withPK := func(items []json.RawMessage) []string {
		var out []string
		for _, it := range items {
			var d struct{ ID, PK string }
			_ = json.Unmarshal(it, &d)
			out = append(out, d.ID+"@"+d.PK)
		}
		return out
	}
	for _, size := range []int32{0, 1, 3} {
		items, _, err := queryAll(t, c, "SELECT * FROM c", azcosmos.NewPartitionKey(), size)
		if err != nil {
			t.Fatal(err)
		}
		if got := withPK(items); !slices.Equal(got, created) {
			t.Errorf("SELECT * FROM c across partitions, page size %d: %v, want creation order %v", size, got, created)
		}
		// A filter the index serves: its candidates in creation order too.
		items, _, err = queryAll(t, c, "SELECT * FROM c WHERE c.kind = 't'", azcosmos.NewPartitionKey(), size)
		if err != nil {
			t.Fatal(err)
		}
		if got := withPK(items); !slices.Equal(got, created) {
			t.Errorf("an index-served filter across partitions, page size %d: %v, want creation order %v", size, got, created)
		}
	}
	var p1 []string
	for _, e := range created {
		if strings.HasSuffix(e, "@p1") {
			p1 = append(p1, e)
		}
	}
	for _, q := range []string{"SELECT * FROM c", "SELECT * FROM c WHERE c.pk = 'p1'"} {
		items, _, err := queryAll(t, c, q, azcosmos.NewPartitionKeyString("p1"), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := withPK(items); !slices.Equal(got, p1) {
			t.Errorf("%s in partition p1: %v, want creation order %v", q, got, p1)
		}
	}
	items, _, err := queryAll(t, c, "SELECT * FROM c WHERE c.pk = 'p1'", azcosmos.NewPartitionKey(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := withPK(items); !slices.Equal(got, p1) {
		t.Errorf("partition p1 pinned by the filter: %v, want creation order %v", got, p1)
	}
}

// TestGoSDKQueryContinuationsHoldUnderConcurrentCreates checks that a query
// paged in creation order while items are created between its pages lists
// every item that existed at the start exactly once, in order, and the new
// ones after them.
func TestGoSDKQueryContinuationsHoldUnderConcurrentCreates(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "live", "/pk")
	var before []string
	for i := range 20 {
		id := fmt.Sprintf("%02d", (i*7)%20)
		pk := fmt.Sprint(i % 4)
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(`{"id":%q,"pk":%q}`, id, pk)), nil); err != nil {
			t.Fatal(err)
		}
		before = append(before, id)
	}
	pager := c.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 3})
	var got []string
	added := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if page.RequestCharge <= 0 || page.QueryMetrics == nil {
			t.Fatalf("page without charge or metrics: %v %v", page.RequestCharge, page.QueryMetrics)
		}
		for _, it := range page.Items {
			got = append(got, idsOf(t, []json.RawMessage{it})...)
		}
		if added < 5 {
			id := fmt.Sprintf("new%d", added)
			if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprint(added%4)), []byte(fmt.Sprintf(`{"id":%q,"pk":"%d"}`, id, added%4)), nil); err != nil {
				t.Fatal(err)
			}
			added++
		}
	}
	if len(got) < len(before) || !slices.Equal(got[:len(before)], before) {
		t.Fatalf("the items that existed at the start: %v, want %v first", got, before)
	}
	for i, id := range got[len(before):] {
		if id != fmt.Sprintf("new%d", i) {
			t.Fatalf("after the original items: %v, want the new ones in creation order", got[len(before):])
		}
	}
}
