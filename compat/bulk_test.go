package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// postBulk sends a bulk request as the JavaScript SDK's executeBulkOperations
// does: not atomic, continue on error, no partition key header, each
// operation with its own partitionKey as a JSON string.
func postBulk(t *testing.T, s *orrerytest.Server, db, coll string, ops []map[string]any) (int, []map[string]any) {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, "POST", "docs", "dbs/"+db+"/colls/"+coll, date)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", s.Endpoint+"dbs/"+db+"/colls/"+coll+"/docs", bytes.NewReader(mustJSON(t, ops)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": auth, "x-ms-date": date, "x-ms-version": "2020-07-15",
		"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false", "x-ms-cosmos-batch-continue-on-error": "true",
		"x-ms-documentdb-partitionkeyrangeid": "0", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var results []map[string]any
	if err := json.Unmarshal(body, &results); err != nil {
		t.Fatalf("bulk response %d %q: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, results
}

func TestBulkNonAtomic(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "items", "/pk")
	status, results := postBulk(t, s, "db", "items", []map[string]any{
		{"operationType": "Create", "partitionKey": `["a"]`, "resourceBody": map[string]any{"id": "1", "pk": "a"}},
		{"operationType": "Create", "partitionKey": `["b"]`, "resourceBody": map[string]any{"id": "1", "pk": "b"}},
		{"operationType": "Create", "partitionKey": `["a"]`, "resourceBody": map[string]any{"id": "1", "pk": "a"}},
		{"operationType": "Upsert", "resourceBody": map[string]any{"id": "2", "pk": "c"}},
		{"operationType": "Patch", "id": "1", "partitionKey": `["b"]`, "resourceBody": map[string]any{"operations": []any{map[string]any{"op": "set", "path": "/x", "value": 1}}}},
		{"operationType": "Read", "id": "1", "partitionKey": `["b"]`},
		{"operationType": "Delete", "id": "1", "partitionKey": `["a"]`},
		{"operationType": "Read", "id": "1"},
	})
	var codes []int
	for _, r := range results {
		codes = append(codes, int(r["statusCode"].(float64)))
	}
	t.Logf("HTTP %d, statuses %v", status, codes)
	if want := []int{201, 201, 409, 201, 200, 200, 204, 400}; status != http.StatusMultiStatus || !slices.Equal(codes, want) {
		t.Fatalf("HTTP %d, statuses %v; want 207, %v", status, codes, want)
	}
	if x := results[5]["resourceBody"].(map[string]any)["x"]; x != 1.0 {
		t.Errorf("read after the bulk patch: x = %v", x)
	}
	if _, ok := results[6]["resourceBody"]; ok {
		t.Errorf("delete result has a resourceBody")
	}
	if _, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "1", nil); statusOf(t, err) != http.StatusNotFound {
		t.Errorf("item a/1 after its bulk delete: %v", err)
	}
	for _, pk := range []string{"b", "c"} {
		id := map[string]string{"b": "1", "c": "2"}[pk]
		if _, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), id, nil); err != nil {
			t.Errorf("item %s/%s written by the bulk request: %v", pk, id, err)
		}
	}
	status, results = postBulk(t, s, "db", "items", []map[string]any{
		{"operationType": "Read", "id": "1", "partitionKey": `["b"]`},
	})
	if status != http.StatusOK || results[0]["statusCode"] != 200.0 {
		t.Errorf("an all-successful bulk request: HTTP %d %v", status, results)
	}
}
