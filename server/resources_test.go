package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestResourceReadFeedsArePaged checks that GET /dbs and GET /dbs/{db}/colls
// honour x-ms-max-item-count and hand out x-ms-continuation until the last
// page, which carries none.
func TestResourceReadFeedsArePaged(t *testing.T) {
	c := newTestServer(t) // holds database "db" with container "c"
	for i := range 4 {
		c.must("POST", "/dbs", fmt.Sprintf(`{"id":"d%d"}`, i), nil, 201)
		c.must("POST", "/dbs/db/colls", fmt.Sprintf(`{"id":"c%d","partitionKey":{"paths":["/pk"]}}`, i), nil, 201)
	}
	tests := []struct {
		name     string
		path     string
		key      string
		maxItems string
		want     []string
		pages    []int
	}{
		{"databases by two", "/dbs", "Databases", "2", []string{"d0", "d1", "d2", "d3", "db"}, []int{2, 2, 1}},
		{"containers by three", "/dbs/db/colls", "DocumentCollections", "3", []string{"c", "c0", "c1", "c2", "c3"}, []int{3, 2}},
		{"containers, -1 is one page", "/dbs/db/colls", "DocumentCollections", "-1", []string{"c", "c0", "c1", "c2", "c3"}, []int{5}},
		{"databases, no header is one page", "/dbs", "Databases", "", []string{"d0", "d1", "d2", "d3", "db"}, []int{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			var pages []int
			continuation := ""
			for range 10 {
				r := c.must("GET", tt.path, "", map[string]string{
					"x-ms-max-item-count": tt.maxItems,
					"x-ms-continuation":   continuation,
				}, 200)
				var feed map[string]json.RawMessage
				if err := json.Unmarshal(r.body, &feed); err != nil {
					t.Fatalf("feed body: %v: %s", err, r.body)
				}
				var docs []struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(feed[tt.key], &docs); err != nil {
					t.Fatalf("%s: %v: %s", tt.key, err, r.body)
				}
				var count int
				if err := json.Unmarshal(feed["_count"], &count); err != nil || count != len(docs) {
					t.Errorf("_count = %s, want %d", feed["_count"], len(docs))
				}
				pages = append(pages, len(docs))
				for _, d := range docs {
					ids = append(ids, d.ID)
				}
				continuation = r.header.Get("x-ms-continuation")
				if continuation == "" {
					break
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.want) {
				t.Errorf("ids = %v, want %v", ids, tt.want)
			}
			if !slices.Equal(pages, tt.pages) {
				t.Errorf("page sizes = %v, want %v", pages, tt.pages)
			}
		})
	}
}

// TestItemsByRIDLink reads, replaces and deletes an item through its _self
// link, as users do with the links Cosmos hands back: the RID names the
// item and its partition key.
func TestItemsByRIDLink(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"a","pk":"p1","v":1}`, pk(`["p1"]`), 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"a","pk":"p2","v":2}`, pk(`["p2"]`), 201)
	var doc struct {
		Self string `json:"_self"`
		V    int    `json:"v"`
	}
	json.Unmarshal(c.must("GET", "/dbs/db/colls/c/docs/a", "", pk(`["p2"]`), 200).body, &doc)
	self := "/" + strings.TrimSuffix(doc.Self, "/")
	if !strings.HasPrefix(self, "/dbs/") || strings.HasSuffix(self, "/docs/a") {
		t.Fatalf("_self %q is not a RID link", doc.Self)
	}

	for _, h := range []map[string]string{nil, pk(`["p2"]`)} {
		r := c.must("GET", self, "", h, 200)
		json.Unmarshal(r.body, &doc)
		if doc.V != 2 {
			t.Fatalf("GET %s (headers %v) gave %s, want the item of partition p2", self, h, r.body)
		}
	}
	c.must("GET", self, "", pk(`["p1"]`), 400)
	c.must("PUT", self, `{"id":"a","pk":"p2","v":3}`, nil, 200)
	json.Unmarshal(c.must("GET", "/dbs/db/colls/c/docs/a", "", pk(`["p2"]`), 200).body, &doc)
	if doc.V != 3 {
		t.Fatalf("after the replace by RID, v = %d, want 3", doc.V)
	}
	c.must("DELETE", self, "", nil, 204)
	c.must("GET", self, "", nil, 404)
	c.must("GET", "/dbs/db/colls/c/docs/a", "", pk(`["p1"]`), 200)
	c.must("GET", "/dbs/db/colls/c/docs/AAAAAAAAAAAAAAAAAAAAAA==", "", pk(`["p1"]`), 404)
}
