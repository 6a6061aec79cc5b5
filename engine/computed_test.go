package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

func queryAll(t *testing.T, e *Engine, q string) string {
	t.Helper()
	res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: q, SinglePartitionKeyRange: true, MaxItems: 1000})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var parts []string
	for _, it := range res.Items {
		parts = append(parts, string(it))
	}
	return strings.Join(parts, ",")
}

const computedContainer = `{"id":"c","partitionKey":{"paths":["/pk"]},
	"computedProperties":[{"name":"cp_lower","query":"SELECT VALUE LOWER(c.name) FROM c"},{"name":"cp_len","query":"SELECT VALUE LENGTH(c.name) FROM c"}],
	"indexingPolicy":{"includedPaths":[{"path":"/*"},{"path":"/cp_lower/?"}],"excludedPaths":[]}}`

func TestComputedPropertiesAreQueriedAndIndexedNotStored(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, computedContainer)
	for i, n := range []string{"Bob", "ALICE", "bob", "Carol"} {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p","name":%q}`, i, n))
	}
	if got := queryAll(t, e, `SELECT VALUE c.id FROM c WHERE c.cp_lower = "bob"`); got != `"0","2"` {
		t.Fatalf("filter on an indexed computed property: %s", got)
	}
	if got := queryAll(t, e, `SELECT VALUE c.id FROM c WHERE c.cp_len = 5`); got != `"1","3"` {
		t.Fatalf("filter on an unindexed computed property: %s", got)
	}
	if got := queryAll(t, e, `SELECT c.id, c.cp_lower FROM c WHERE c.id = "1"`); got != `{"id":"1","cp_lower":"alice"}` {
		t.Fatalf("projection of a computed property: %s", got)
	}
	if got := queryAll(t, e, `SELECT VALUE c.id FROM c ORDER BY c.cp_lower`); got != `"1","0","2","3"` {
		t.Fatalf("ORDER BY a computed property: %s", got)
	}
	if got := queryAll(t, e, `SELECT * FROM c WHERE c.id = "0"`); strings.Contains(got, "cp_") {
		t.Fatalf("SELECT * shows computed properties: %s", got)
	}
	res, err := e.ReadItem(ctx, req("0", "p", ""))
	if err != nil || strings.Contains(string(res.Body), "cp_") {
		t.Fatalf("a point read shows computed properties: %s %v", res.Body, err)
	}
	// The index holds the computed values: an index range on /cp_lower finds them.
	c, _ := e.Container(ctx, "db", "c")
	if !c.index.IndexesComputed("cp_lower") || c.index.IndexesComputed("cp_len") {
		t.Fatal("only the explicitly included computed property is indexed")
	}
	prefix := keys.IndexPathPrefix(c.rid, "/cp_lower")
	keys, _, _ := collectKeys(ctx, e.store, prefix, append(append([]byte(nil), prefix...), 0xff), 100)
	if len(keys) != 4 {
		t.Fatalf("%d index entries under /cp_lower, want 4", len(keys))
	}
}

func TestReplacingComputedPropertiesRebuildsTheIndex(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, computedContainer)
	for i, n := range []string{"Bob", "ALICE"} {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p","name":%q}`, i, n))
	}
	replaced := strings.Replace(computedContainer, "LOWER(c.name)", "UPPER(c.name)", 1)
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(replaced), ""); err != nil {
		t.Fatal(err)
	}
	if got := queryAll(t, e, `SELECT VALUE c.id FROM c WHERE c.cp_lower = "BOB"`); got != `"0"` {
		t.Fatalf("after the replace the indexed filter found %s, want the new definition's match", got)
	}
	if got := queryAll(t, e, `SELECT VALUE c.id FROM c WHERE c.cp_lower = "bob"`); got != `` {
		t.Fatalf("after the replace the old definition's values still match: %s", got)
	}
}

func TestInvalidComputedPropertiesAreRefused(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	// A definition may read the persisted property of its own name.
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"own","partitionKey":{"paths":["/pk"]},"computedProperties":[{"name":"a","query":"SELECT VALUE LOWER(c.a) FROM c"}]}`), nil); err != nil {
		t.Fatalf("a computed property reading its own name: %v", err)
	}
	var many []string
	for i := range 21 {
		many = append(many, fmt.Sprintf(`{"name":"cp%d","query":"SELECT VALUE c.a FROM c"}`, i))
	}
	for _, cps := range []string{
		`[{"name":"id","query":"SELECT VALUE c.a FROM c"}]`,
		`[{"name":"a","query":"SELECT VALUE c.a FROM c"},{"name":"a","query":"SELECT VALUE c.b FROM c"}]`,
		`[{"name":"a","query":"SELECT c.a FROM c"}]`,
		`[` + strings.Join(many, ",") + `]`,
		`{"name":"a"}`,
		`[{"name":"a","query":"SELECT VALUE c.x FROM c"},{"name":"b","query":"SELECT VALUE UPPER(r.a) FROM r"}]`,
	} {
		_, err := e.CreateContainer(ctx, "db", []byte(`{"id":"bad","partitionKey":{"paths":["/pk"]},"computedProperties":`+cps+`}`), nil)
		if statusOf(err) != 400 {
			t.Errorf("%s: %v, want 400", cps, err)
		}
	}
}
