package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// queryAll pages through a query and returns every result.
func queryAll(t *testing.T, c *azcosmos.ContainerClient, q string, pk azcosmos.PartitionKey, pageSize int32) ([]json.RawMessage, int, error) {
	t.Helper()
	pager := c.NewQueryItemsPager(q, pk, &azcosmos.QueryOptions{PageSizeHint: pageSize})
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

func TestGoSDKQueryPagingReturnsEveryItemOnce(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "paging", "/pk")
	const n = 10000
	for i := 0; i < n; i += 100 {
		pk := fmt.Sprintf("p%d", (i/100)%10)
		for j := i; j < i+100; j++ {
			if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(`{"id":"%d","pk":%q,"n":%d,"tags":["a","b"]}`, j, pk, j)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		query string
		pk    azcosmos.PartitionKey
		want  int
	}{
		{"plain cross-partition", "SELECT c.id FROM c", azcosmos.NewPartitionKey(), n},
		{"filtered", "SELECT VALUE c.n FROM c WHERE c.n % 3 = 0", azcosmos.NewPartitionKey(), (n + 2) / 3},
		{"join fans out", "SELECT c.id, t AS tag FROM c JOIN t IN c.tags", azcosmos.NewPartitionKey(), 2 * n},
		{"one partition", "SELECT c.id FROM c", azcosmos.NewPartitionKeyString("p3"), n / 10},
		{"one partition ordered", "SELECT c.id FROM c ORDER BY c.n DESC", azcosmos.NewPartitionKeyString("p3"), n / 10},
		{"one partition offset", "SELECT c.id FROM c OFFSET 5 LIMIT 33", azcosmos.NewPartitionKeyString("p3"), 33},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, pages, err := queryAll(t, c, tc.query, tc.pk, 7)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, it := range items {
				k := string(it)
				if seen[k] {
					t.Fatalf("result %s returned twice", k)
				}
				seen[k] = true
			}
			if len(items) != tc.want {
				t.Fatalf("%d results in %d pages, want %d", len(items), pages, tc.want)
			}
		})
	}
}

func TestGoSDKCrossPartitionQueryFidelity(t *testing.T) {
	ctx := context.Background()
	for _, serve := range []bool{false, true} {
		s := orrerytest.StartWith(t, orrerytest.Options{ServeCrossPartitionQueries: serve})
		c := newContainer(t, s, "db", "x", "/pk")
		for i := 0; i < 5; i++ {
			pk := fmt.Sprint(i % 2)
			if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(`{"id":"%d","pk":%q,"n":%d}`, i, pk, i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"SELECT VALUE COUNT(1) FROM c", "SELECT * FROM c ORDER BY c.n", "SELECT DISTINCT c.pk FROM c", "SELECT TOP 1 * FROM c"} {
			items, _, err := queryAll(t, c, q, azcosmos.NewPartitionKey(), 0)
			if !serve {
				if got := statusOf(t, err); got != http.StatusBadRequest {
					t.Fatalf("%s across partitions from the Go SDK: status %d, want 400 as from the service", q, got)
				}
				continue
			}
			if err != nil || len(items) == 0 {
				t.Fatalf("%s with cross-partition queries served: %v %d", q, err, len(items))
			}
		}
		// Within one partition every query is served.
		items, _, err := queryAll(t, c, "SELECT VALUE COUNT(1) FROM c", azcosmos.NewPartitionKeyString("0"), 0)
		if err != nil || len(items) != 1 || string(items[0]) != "3" {
			t.Fatalf("count in partition 0: %s %v", items, err)
		}
	}
}
