package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
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

// loadItems creates items with transactional batches of 100 items of one
// partition, the quickest way through the SDK; doc renders item i.
func loadItems(t *testing.T, c *azcosmos.ContainerClient, n int, pkOf func(i int) string, doc func(i int) string) {
	t.Helper()
	byPK := map[string][]int{}
	var order []string
	for i := 0; i < n; i++ {
		pk := pkOf(i)
		if _, ok := byPK[pk]; !ok {
			order = append(order, pk)
		}
		byPK[pk] = append(byPK[pk], i)
	}
	for _, pk := range order {
		ids := byPK[pk]
		for len(ids) > 0 {
			chunk := ids[:min(100, len(ids))]
			ids = ids[len(chunk):]
			b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(pk))
			for _, i := range chunk {
				b.CreateItem([]byte(doc(i)), nil)
			}
			resp, err := c.ExecuteTransactionalBatch(context.Background(), b, nil)
			if err != nil || !resp.Success {
				t.Fatalf("loading items: %v", err)
			}
		}
	}
}

func TestGoSDKQueryPagingReturnsEveryItemOnce(t *testing.T) {
	s := orrerytest.Start(t)
	const n = 10000
	spread := newContainer(t, s, "db", "paging", "/pk")
	loadItems(t, spread, n, func(i int) string { return fmt.Sprintf("p%d", (i/100)%10) },
		func(i int) string {
			return fmt.Sprintf(`{"id":"%d","pk":"p%d","n":%d,"tags":["a","b"]}`, i, (i/100)%10, i)
		})
	single := newContainer(t, s, "db", "single", "/pk")
	loadItems(t, single, n, func(int) string { return "one" },
		func(i int) string { return fmt.Sprintf(`{"id":"%d","pk":"one","n":%d}`, i, (i*7919)%n) })
	one := azcosmos.NewPartitionKeyString("one")
	cases := []struct {
		name  string
		c     *azcosmos.ContainerClient
		query string
		pk    azcosmos.PartitionKey
		want  int
		// descending, when set, checks that the results are the numbers
		// n-1 down to 0 in that order.
		descending bool
	}{
		{"plain cross-partition", spread, "SELECT c.id FROM c", azcosmos.NewPartitionKey(), n, false},
		{"filtered", spread, "SELECT VALUE c.n FROM c WHERE c.n % 3 = 0", azcosmos.NewPartitionKey(), (n + 2) / 3, false},
		{"join fans out", spread, "SELECT c.id, t AS tag FROM c JOIN t IN c.tags", azcosmos.NewPartitionKey(), 2 * n, false},
		{"one partition of ten", spread, "SELECT c.id FROM c", azcosmos.NewPartitionKeyString("p3"), n / 10, false},
		{"one partition of ten, offset", spread, "SELECT c.id FROM c OFFSET 5 LIMIT 33", azcosmos.NewPartitionKeyString("p3"), 33, false},
		{"plain, all in one partition", single, "SELECT c.id FROM c", one, n, false},
		{"ORDER BY, all in one partition", single, "SELECT VALUE c.n FROM c ORDER BY c.n DESC", one, n, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, pages, err := queryAll(t, tc.c, tc.query, tc.pk, 7)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i, it := range items {
				k := string(it)
				if seen[k] {
					t.Fatalf("result %s returned twice", k)
				}
				seen[k] = true
				if tc.descending && k != fmt.Sprint(n-1-i) {
					t.Fatalf("result %d is %s, want %d", i, k, n-1-i)
				}
			}
			if len(items) != tc.want || pages < tc.want/7 {
				t.Fatalf("%d results in %d pages, want %d in pages of 7", len(items), pages, tc.want)
			}
		})
	}
}

func TestGoSDKCrossPartitionQueryFidelity(t *testing.T) {
	ctx := context.Background()
	for _, serve := range []bool{false, true} {
		s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ServeCrossPartitionQueries: serve}})
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

// TestGoSDKQueryErrors checks that bad queries answer 400 with a message that
// says what is wrong and where, with or without a partition key.
func TestGoSDKQueryErrors(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "errs", "/pk")
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("a"), []byte(`{"id":"1","pk":"a"}`), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		query string
		want  []string // substrings of the message
	}{
		{"misspelt keyword", "SELECT * FORM c", []string{"Syntax error, incorrect syntax near 'FORM'.", "offset 9-13"}},
		{"bad token mid-query", "SELECT c.id FROM c WHERE c.id = = 1", []string{"incorrect syntax near '='", "offset 32-33"}},
		{"unterminated query", "SELECT c.id FROM c WHERE", []string{"Syntax error, unexpected end-of-file."}},
		{"unknown built-in function", "SELECT VALUE FOO(c.id) FROM c", []string{"'FOO' is not a recognized built-in function name."}},
		{"unknown user-defined function", "SELECT VALUE udf.nope(c.id) FROM c", []string{"Unknown function 'udf.nope'."}},
		{"wrong number of arguments", "SELECT VALUE ABS(1, 2) FROM c", []string{"The ABS function requires 1 argument(s)."}},
	}
	for _, tc := range cases {
		for _, pk := range []azcosmos.PartitionKey{azcosmos.NewPartitionKeyString("a"), azcosmos.NewPartitionKey()} {
			_, _, err := queryAll(t, c, tc.query, pk, 0)
			if err == nil {
				t.Fatalf("%s: %q succeeded", tc.name, tc.query)
			}
			status, msg := responseError(t, err)
			if status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400: %s", tc.name, status, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: message %q lacks %q", tc.name, msg, w)
				}
			}
		}
	}
}

// TestGoSDKIndexingPolicyReplace replaces a container's indexing policy
// through the Go SDK, from one that indexes only /a to the default, and
// queries on a newly indexed path: every existing item is found, as with a
// policy that indexed it from the start.
func TestGoSDKIndexingPolicyReplace(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Client.NewDatabase("db")
	props := azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		IndexingPolicy: &azcosmos.IndexingPolicy{Automatic: true, IndexingMode: azcosmos.IndexingModeConsistent,
			IncludedPaths: []azcosmos.IncludedPath{{Path: "/a/?"}}, ExcludedPaths: []azcosmos.ExcludedPath{{Path: "/*"}}}}
	if _, err := d.CreateContainer(ctx, props, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewContainer("c")
	loadItems(t, c, 300, func(i int) string { return "p" + fmt.Sprint(i%3) }, func(i int) string {
		return fmt.Sprintf(`{"id":"i%d","pk":"p%d","a":%d,"b":%d}`, i, i%3, i%2, i%10)
	})
	count := func() int {
		t.Helper()
		items, _, err := queryAll(t, c, "SELECT c.id FROM c WHERE c.b = 7", azcosmos.NewPartitionKeyString("p1"), 7)
		if err != nil {
			t.Fatal(err)
		}
		return len(items)
	}
	want := count() // unindexed path: the items are scanned
	if want != 10 {
		t.Fatalf("before the replace: %d items with b = 7 in p1, want 10", want)
	}
	props.IndexingPolicy = &azcosmos.IndexingPolicy{Automatic: true, IndexingMode: azcosmos.IndexingModeConsistent,
		IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}}}
	resp, err := c.Replace(ctx, props, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerProperties.IndexingPolicy.IncludedPaths; len(got) != 1 || got[0].Path != "/*" {
		t.Fatalf("the replace answered the policy %+v", resp.ContainerProperties.IndexingPolicy)
	}
	if got := count(); got != want {
		t.Fatalf("after the replace: %d items with b = 7 in p1, want %d", got, want)
	}
}

// TestGoSDKQueryParametersBindAsTheSDKSentThem: every kind of parameter
// value the Go SDK serializes (strings with quotes, backslashes, escapes
// and non-ASCII, numbers, booleans, null, objects, arrays) binds to the
// value sent, so a query comparing an item's properties with them finds
// exactly that item; a parameter differing in one value finds nothing.
func TestGoSDKQueryParametersBindAsTheSDKSentThem(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "params", "/pk")
	doc := `{"id":"1","pk":"a","s":"q\"uo\\te <&> é \u2028 😀","n":-12.5,"t":true,"o":{"k":[1,"x",null]},"a":[{"b":2},"c"]}`
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("a"), []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT VALUE c.id FROM c WHERE c.s = @s AND c.n = @n AND c.t = @t AND c.o = @o AND c.a = @a AND IS_NULL(@z)"
	params := func(s string) []azcosmos.QueryParameter {
		return []azcosmos.QueryParameter{{Name: "@s", Value: s}, {Name: "@n", Value: -12.5}, {Name: "@t", Value: true},
			{Name: "@o", Value: map[string]any{"k": []any{1, "x", nil}}}, {Name: "@a", Value: []any{map[string]any{"b": 2}, "c"}},
			{Name: "@z", Value: nil}}
	}
	for _, tc := range []struct {
		s    string
		want string
	}{
		{"q\"uo\\te <&> é \u2028 😀", `["1"]`},
		{"q\"uo\\te <&> é \u2028 😁", `[]`},
	} {
		for _, pk := range []azcosmos.PartitionKey{azcosmos.NewPartitionKeyString("a"), azcosmos.NewPartitionKey()} {
			got, _, err := queryAllWith(t, c, q, pk, &azcosmos.QueryOptions{QueryParameters: params(tc.s)})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(append([]json.RawMessage{}, got...))
			if string(b) != tc.want {
				t.Fatalf("@s %q: %s, want %s", tc.s, b, tc.want)
			}
		}
	}
}
