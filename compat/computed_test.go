package compat

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// The Go SDK v1.5.0 has no computedProperties field: the container is
// created over HTTP as an application on a newer SDK would, and queried
// through the SDK.
func TestGoSDKQueriesReadComputedProperties(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"people","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},
		"computedProperties":[{"name":"cp_lower","query":"SELECT VALUE LOWER(c.name) FROM c"}],
		"indexingPolicy":{"includedPaths":[{"path":"/*"},{"path":"/cp_lower/?"}],"excludedPaths":[]}}`)
	if r := rawRequest(t, s, "POST", "/dbs/db/colls", "colls", "dbs/db", body, nil); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	} else if !strings.Contains(string(r.body), `"computedProperties"`) {
		t.Fatalf("the container does not show its computed properties: %s", r.body)
	}
	bad := []byte(`{"id":"bad","partitionKey":{"paths":["/pk"]},"computedProperties":[{"name":"_ts","query":"SELECT VALUE c.a FROM c"}]}`)
	if r := rawRequest(t, s, "POST", "/dbs/db/colls", "colls", "dbs/db", bad, nil); r.status != http.StatusBadRequest {
		t.Fatalf("a computed property named _ts: %d %s, want 400", r.status, r.body)
	}
	db, _ := s.Client.NewDatabase("db")
	c, _ := db.NewContainer("people")
	pk := azcosmos.NewPartitionKeyString("p")
	for _, it := range []string{`{"id":"1","pk":"p","name":"Bob"}`, `{"id":"2","pk":"p","name":"ALICE"}`, `{"id":"3","pk":"p","name":"bOB"}`} {
		if _, err := c.CreateItem(ctx, pk, []byte(it), nil); err != nil {
			t.Fatal(err)
		}
	}
	query := func(q string) []string {
		t.Helper()
		var out []string
		pager := c.NewQueryItemsPager(q, pk, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			for _, it := range page.Items {
				out = append(out, string(it))
			}
		}
		return out
	}
	if got := query(`SELECT VALUE c.id FROM c WHERE c.cp_lower = "bob"`); strings.Join(got, ",") != `"1","3"` {
		t.Fatalf("filter on the computed property: %v", got)
	}
	if got := query(`SELECT c.id, c.cp_lower FROM c WHERE c.id != "3" ORDER BY c.cp_lower`); strings.Join(got, ",") != `{"id":"2","cp_lower":"alice"},{"id":"1","cp_lower":"bob"}` {
		t.Fatalf("projection and ORDER BY: %v", got)
	}
	for _, doc := range query(`SELECT * FROM c`) {
		if strings.Contains(doc, "cp_lower") {
			t.Fatalf("SELECT * shows the computed property: %s", doc)
		}
	}
	item, err := c.ReadItem(ctx, pk, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(item.Value, &m)
	if _, ok := m["cp_lower"]; ok {
		t.Fatalf("a point read shows the computed property: %s", item.Value)
	}
}
