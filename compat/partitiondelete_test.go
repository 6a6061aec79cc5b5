package compat

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// The Go SDK v1.5.0 has no delete-by-partition-key: the operation is sent
// over HTTP as the JavaScript (signed as its container) and Python (signed
// as "partitionkey") SDKs send it.
func TestPartitionKeyDeleteOverHTTP(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "c", "/pk")
	for _, pk := range []string{"A", "B", "C"} {
		for i := range 50 {
			if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), mustJSON(t, map[string]any{"id": fmt.Sprint(i), "pk": pk}), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	const path = "/dbs/db/colls/c/operations/partitionkeydelete"
	count := func(pk string) int {
		t.Helper()
		pager := c.NewQueryItemsPager("SELECT VALUE COUNT(1) FROM c", azcosmos.NewPartitionKeyString(pk), nil)
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		fmt.Sscan(string(page.Items[0]), &n)
		return n
	}
	if r := rawRequest(t, s, "POST", path, "colls", "dbs/db/colls/c", nil, nil); r.status != http.StatusBadRequest {
		t.Fatalf("without a partition key: %d %s, want 400", r.status, r.body)
	}
	if r := rawRequest(t, s, "GET", path, "colls", "dbs/db/colls/c", nil, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d %s, want 405", r.status, r.body)
	}
	if r := rawRequest(t, s, "POST", path, "colls", "dbs/db/colls/c", nil, map[string]string{"x-ms-documentdb-partitionkey": `["A"]`}); r.status != http.StatusOK {
		t.Fatalf("delete A: %d %s", r.status, r.body)
	}
	if r := rawRequest(t, s, "POST", path, "partitionkey", "dbs/db/colls/c", nil, map[string]string{"x-ms-documentdb-partitionkey": `["B"]`}); r.status != http.StatusOK {
		t.Fatalf("delete B signed as the Python SDK signs: %d %s", r.status, r.body)
	}
	if a, b, cc := count("A"), count("B"), count("C"); a != 0 || b != 0 || cc != 50 {
		t.Fatalf("after deleting A and B: A %d, B %d, C %d items; want 0, 0, 50", a, b, cc)
	}
	if r := rawRequest(t, s, "POST", "/dbs/db/colls/missing/operations/partitionkeydelete", "colls", "dbs/db/colls/missing", nil,
		map[string]string{"x-ms-documentdb-partitionkey": `["A"]`}); r.status != http.StatusNotFound {
		t.Fatalf("a missing container: %d %s, want 404", r.status, r.body)
	}
}
