package server

import (
	"encoding/json"
	"fmt"
	"slices"
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
