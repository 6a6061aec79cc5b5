package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// TestQueryItemsByHierarchicalKeyPrefix checks that a query whose partition
// key header holds fewer values than a MultiHash container has paths reads
// exactly the logical partitions under that prefix, and that a full key or a
// malformed one still behaves as before.
func TestQueryItemsByHierarchicalKeyPrefix(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	t.Cleanup(func() { store.Close() })
	e, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	containers := map[string]string{
		"h3":   `{"id":"h3","partitionKey":{"paths":["/a","/b","/c"],"kind":"MultiHash","version":2}}`,
		"hash": `{"id":"hash","partitionKey":{"paths":["/a"]}}`,
	}
	for _, body := range containers {
		if _, err := e.CreateContainer(ctx, "db", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	items := map[string][]string{
		"h3": {
			`{"id":"1","a":"x","b":"p","c":1}`,
			`{"id":"2","a":"x","b":"p","c":2}`,
			`{"id":"3","a":"x","b":"q","c":1}`,
			`{"id":"4","a":"y","b":"p","c":1}`,
			`{"id":"5","a":"x"}`,
			`{"id":"6","a":null,"b":"p","c":1}`,
		},
		"hash": {`{"id":"1","a":"x"}`, `{"id":"2","a":"y"}`},
	}
	for coll, docs := range items {
		for _, d := range docs {
			if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: coll, Body: []byte(d)}); err != nil {
				t.Fatalf("create %s in %s: %v", d, coll, err)
			}
		}
	}

	tests := []struct {
		name       string
		container  string
		header     string
		wantIDs    []string
		wantStatus int
	}{
		{"one-value prefix", "h3", `["x"]`, []string{"1", "2", "3", "5"}, 0},
		{"two-value prefix", "h3", `["x","p"]`, []string{"1", "2"}, 0},
		{"prefix with an absent value", "h3", `["x",{}]`, []string{"5"}, 0},
		{"null prefix", "h3", `[null]`, []string{"6"}, 0},
		{"prefix nothing has", "h3", `["z"]`, nil, 0},
		{"full key", "h3", `["x","p",2]`, []string{"2"}, 0},
		{"too many values", "h3", `["x","p",1,"extra"]`, nil, 400},
		{"single-path key", "hash", `["y"]`, []string{"2"}, 0},
		{"no prefixes on a Hash container", "hash", `[]`, nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk, err := ParsePartitionKeyHeader(tt.header)
			if err != nil {
				t.Fatalf("parse %s: %v", tt.header, err)
			}
			res, err := e.QueryItems(context.Background(), &QueryRequest{
				Database: "db", Container: tt.container, Query: "SELECT VALUE c.id FROM c",
				PartitionKey: pk, HasPartitionKey: true,
			})
			if tt.wantStatus != 0 {
				var ee *Error
				if !errors.As(err, &ee) || ee.Status != tt.wantStatus {
					t.Fatalf("err = %v, want status %d", err, tt.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, raw := range res.Items {
				var id string
				if err := json.Unmarshal(raw, &id); err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantIDs) {
				t.Errorf("ids = %v, want %v", got, tt.wantIDs)
			}
		})
	}
}
