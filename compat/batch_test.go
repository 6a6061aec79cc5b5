package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// newOrder is the seed's order helper.
func newOrder(id, customer string, total float64) map[string]any {
	return map[string]any{"id": id, "customerId": customer, "total": total}
}

// queryRows runs a query and returns its results.
func queryRows(t *testing.T, c *azcosmos.ContainerClient, q string, pk azcosmos.PartitionKey) []json.RawMessage {
	t.Helper()
	rows, _, err := queryAll(t, c, q, pk, 0)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return rows
}

func rawList(v []json.RawMessage) string {
	parts := make([]string, len(v))
	for i, r := range v {
		parts[i] = string(r)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TestSeed001Scope is seed 001's scope.py: a batch for customer c1 that also
// creates an order of customer c2 fails whole and writes nothing.
func TestSeed001Scope(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	orders := newContainer(t, s, "shop", "orders", "/customerId")
	b := orders.NewTransactionalBatch(azcosmos.NewPartitionKeyString("c1"))
	b.CreateItem(mustJSON(t, newOrder("o1", "c1", 20.5)), nil)
	b.CreateItem(mustJSON(t, newOrder("o2", "c2", 12.5)), nil)
	resp, err := orders.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	tr := &transcript{t: t}
	if !resp.Success {
		tr.printf("batch for c1 and c2: %s", batchError(resp))
	}
	// The seed counts across partitions with the Python SDK's query plan; the
	// Go SDK sends no plan, and the gateway refuses a cross-partition
	// aggregate from it, so count each customer's partition and add.
	written := 0
	for _, customer := range []string{"c1", "c2"} {
		var n int
		json.Unmarshal(queryRows(t, orders, "SELECT VALUE COUNT(1) FROM c", azcosmos.NewPartitionKeyString(customer))[0], &n)
		written += n
	}
	tr.printf("orders written: [%d]", written)
	tr.expect(
		"batch for c1 and c2: 400, error_index 1, [424, 400]",
		"orders written: [0]")
}

// TestSeed001Batch is seed 001's batch.py: a batch creates an order and
// increments the customer's order count; a second one fails at index 2 and
// rolls back its order and its increment.
func TestSeed001Batch(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	shop := newContainer(t, s, "shop", "orders", "/customerId")
	c1 := azcosmos.NewPartitionKeyString("c1")
	if _, err := shop.UpsertItem(ctx, c1, mustJSON(t, map[string]any{"id": "c1", "customerId": "c1", "orderCount": 0}), nil); err != nil {
		t.Fatal(err)
	}
	var countUp azcosmos.PatchOperations
	countUp.AppendIncrement("/orderCount", 1)
	tr := &transcript{t: t}

	b := shop.NewTransactionalBatch(c1)
	b.CreateItem(mustJSON(t, newOrder("o1", "c1", 20.5)), nil)
	b.PatchItem("c1", countUp, nil)
	ok, err := shop.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil || !ok.Success {
		t.Fatalf("batch 1: %v %v", err, statusCodes(ok))
	}
	tr.printf("batch 1: %s", pyList(statusCodes(ok)))

	b = shop.NewTransactionalBatch(c1)
	b.CreateItem(mustJSON(t, newOrder("o2", "c1", 9.5)), nil)
	b.PatchItem("c1", countUp, nil)
	b.CreateItem(mustJSON(t, newOrder("o1", "c1", 1.5)), nil)
	failed, err := shop.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		t.Fatalf("batch 2: %v", err)
	}
	if failed.RawResponse.StatusCode != http.StatusMultiStatus || failed.Success {
		t.Errorf("batch 2: HTTP %d, Success %v; want 207 and false", failed.RawResponse.StatusCode, failed.Success)
	}
	tr.printf("batch 2: %s", batchError(failed))

	var ids []string
	for _, r := range queryRows(t, shop, "SELECT VALUE c.id FROM c", c1) {
		var id string
		json.Unmarshal(r, &id)
		ids = append(ids, id)
	}
	sort.Strings(ids)
	d, _ := readDoc(t, shop, c1, "c1")
	tr.printf("items for c1: %s | orderCount %v", pyList(ids), d["orderCount"])
	tr.expect(
		"batch 1: [201, 200]",
		"batch 2: 409, error_index 2, [424, 424, 409]",
		"items for c1: ['c1', 'o1'] | orderCount 1")
}

// TestSeed001Seats is seed 001's seats.py: a seat id that can be created
// once, created with its order in one batch, is never sold twice, not even
// to ten buyers at the same moment.
func TestSeed001Seats(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	seats := newContainer(t, s, "shop", "seats", "/eventId")
	e1 := azcosmos.NewPartitionKeyString("e1")
	book := func(seat, buyer string) string {
		b := seats.NewTransactionalBatch(e1)
		b.CreateItem(mustJSON(t, map[string]any{"id": seat, "eventId": "e1", "buyer": buyer}), nil)
		b.CreateItem(mustJSON(t, map[string]any{"id": "order-" + seat + "-" + buyer, "eventId": "e1"}), nil)
		resp, err := seats.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil {
			t.Errorf("batch: %v", err)
			return "error"
		}
		if resp.Success {
			return "sold"
		}
		return "rejected " + pyList(statusCodes(resp))
	}
	tr := &transcript{t: t}
	tr.printf("ann books A12: %s", book("A12", "ann"))
	tr.printf("ben books A12: %s", book("A12", "ben"))
	results := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 10 {
		wg.Go(func() {
			<-start
			r := book("B7", fmt.Sprintf("fan%d", i))
			mu.Lock()
			results[r]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	var keys []string
	for k := range results {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, fmt.Sprintf("('%s', %d)", k, results[k]))
	}
	tr.printf("10 buyers race for B7: [%s]", strings.Join(pairs, ", "))
	rows := queryRows(t, seats, "SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'order-')", e1)
	tr.printf("orders in e1: %s", rawList(rows))
	tr.expect(
		"ann books A12: sold",
		"ben books A12: rejected [409, 424]",
		"10 buyers race for B7: [('rejected [409, 424]', 9), ('sold', 1)]",
		"orders in e1: [2]")
}

// TestGoSDKBatchOperations runs every operation type in one batch, checks
// that reads see the batch's earlier writes, and which results carry bodies.
func TestGoSDKBatchOperations(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "items", "/pk")
	pk := azcosmos.NewPartitionKeyString("a")
	cr, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "old", "pk": "a", "n": 1}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var incr azcosmos.PatchOperations
	incr.AppendIncrement("/n", 41)
	b := c.NewTransactionalBatch(pk)
	b.CreateItem(mustJSON(t, map[string]any{"id": "new", "pk": "a", "n": 1}), nil)
	b.ReadItem("new", nil)
	b.PatchItem("new", incr, nil)
	b.ReadItem("new", nil)
	b.ReplaceItem("old", mustJSON(t, map[string]any{"id": "old", "pk": "a", "n": 2}), &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &cr.ETag})
	b.UpsertItem(mustJSON(t, map[string]any{"id": "up", "pk": "a"}), nil)
	b.DeleteItem("old", nil)
	b.ReadItem("up", nil)
	resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatalf("batch failed: %v", statusCodes(resp))
	}
	if got, want := statusCodes(resp), []int{201, 200, 200, 200, 200, 201, 204, 200}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	r := resp.OperationResults
	if n := decode(t, r[1].ResourceBody)["n"]; n != 1.0 {
		t.Errorf("read after create: n = %v, want 1", n)
	}
	if n := decode(t, r[3].ResourceBody)["n"]; n != 42.0 {
		t.Errorf("read after patch: n = %v, want 42", n)
	}
	// A batch with a read gets bodies on writes too (the Go SDK drops Prefer);
	// the delete never has one.
	if r[0].ResourceBody == nil || r[6].ResourceBody != nil {
		t.Errorf("bodies: create %q, delete %q", r[0].ResourceBody, r[6].ResourceBody)
	}
	for i, op := range r {
		if op.RequestCharge <= 0 || (op.StatusCode != 204 && op.ETag == "") {
			t.Errorf("operation %d: charge %v etag %q", i, op.RequestCharge, op.ETag)
		}
	}
	if _, err := c.ReadItem(ctx, pk, "old", nil); statusOf(t, err) != http.StatusNotFound {
		t.Errorf("deleted in the batch, read: %v", err)
	}

	// Without a read the Go SDK asks for return=minimal: no bodies.
	b = c.NewTransactionalBatch(pk)
	b.UpsertItem(mustJSON(t, map[string]any{"id": "up", "pk": "a", "v": 2}), nil)
	resp, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil || !resp.Success || resp.OperationResults[0].ResourceBody != nil {
		t.Errorf("minimal batch: %v %v body %q", err, resp.Success, resp.OperationResults[0].ResourceBody)
	}
	resp, err = c.ExecuteTransactionalBatch(ctx, b, &azcosmos.TransactionalBatchOptions{EnableContentResponseOnWrite: true})
	if err != nil || !resp.Success || resp.OperationResults[0].ResourceBody == nil {
		t.Errorf("batch with content response: %v %v body %q", err, resp.Success, resp.OperationResults[0].ResourceBody)
	}
}

// TestGoSDKBatchFailures checks that any failing operation rolls back the
// whole batch, and the batch limits.
func TestGoSDKBatchFailures(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "items", "/pk")
	pk := azcosmos.NewPartitionKeyString("a")
	if _, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "x", "pk": "a", "n": 1}), nil); err != nil {
		t.Fatal(err)
	}
	stale := azcosmosETag(`"stale"`)
	var badPatch azcosmos.PatchOperations
	badPatch.AppendReplace("/missing", 1)
	var falseCond azcosmos.PatchOperations
	falseCond.AppendIncrement("/n", 1)
	// The batch's own increment makes n 101 before the condition is read.
	falseCond.SetCondition("FROM c WHERE c.n < 5")
	tests := []struct {
		name  string
		fail  func(b *azcosmos.TransactionalBatch)
		codes []int
	}{
		{"read of a missing item", func(b *azcosmos.TransactionalBatch) { b.ReadItem("nope", nil) }, []int{424, 424, 404}},
		{"replace of a missing item", func(b *azcosmos.TransactionalBatch) {
			b.ReplaceItem("nope", mustJSON(t, map[string]any{"id": "nope", "pk": "a"}), nil)
		}, []int{424, 424, 404}},
		{"delete with a stale etag", func(b *azcosmos.TransactionalBatch) {
			b.DeleteItem("x", &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &stale})
		}, []int{424, 424, 412}},
		{"a patch that cannot apply", func(b *azcosmos.TransactionalBatch) { b.PatchItem("x", badPatch, nil) }, []int{424, 424, 400}},
		{"a patch whose condition is false", func(b *azcosmos.TransactionalBatch) { b.PatchItem("x", falseCond, nil) }, []int{424, 424, 412}},
		{"an item of another partition", func(b *azcosmos.TransactionalBatch) {
			b.UpsertItem(mustJSON(t, map[string]any{"id": "y", "pk": "b"}), nil)
		}, []int{424, 424, 400}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := c.NewTransactionalBatch(pk)
			b.CreateItem(mustJSON(t, map[string]any{"id": "new", "pk": "a"}), nil)
			b.PatchItem("x", func() azcosmos.PatchOperations {
				var p azcosmos.PatchOperations
				p.AppendIncrement("/n", 100)
				return p
			}(), nil)
			tc.fail(&b)
			resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Success || !slices.Equal(statusCodes(resp), tc.codes) {
				t.Errorf("Success %v, statuses %v; want false, %v", resp.Success, statusCodes(resp), tc.codes)
			}
			if _, err := c.ReadItem(ctx, pk, "new", nil); statusOf(t, err) != http.StatusNotFound {
				t.Errorf("the failed batch's create is there: %v", err)
			}
			if d, _ := readDoc(t, c, pk, "x"); d["n"] != 1.0 {
				t.Errorf("the failed batch's patch is there: n = %v", d["n"])
			}
		})
	}

	b := c.NewTransactionalBatch(pk)
	for i := range 101 {
		b.ReadItem(fmt.Sprint(i), nil)
	}
	_, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	if statusOf(t, err) != http.StatusBadRequest {
		t.Errorf("101 operations: %v, want 400", err)
	} else {
		t.Log(firstLine(t, err))
	}
	b = c.NewTransactionalBatch(pk)
	big := strings.Repeat("x", 700*1024)
	for i := range 3 {
		b.CreateItem(mustJSON(t, map[string]any{"id": fmt.Sprint("big", i), "pk": "a", "s": big}), nil)
	}
	_, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	if statusOf(t, err) != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2.1 MB batch: %v, want 413", err)
	} else {
		t.Log(firstLine(t, err))
	}
}
