package engine

import (
	"fmt"
	"strings"
	"testing"
)

// A query text parsed on a container is parsed again after a replace that
// redefines a computed property it reads: the parsed query is the
// container's, not the text's.
func TestAQueryReadsTheComputedPropertiesOfTheContainerAsItIsNow(t *testing.T) {
	e, _ := newTestEngine(t)
	createContainer(t, e, computedContainer)
	for i, n := range []string{"Bob", "ALICE"} {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p","name":%q}`, i, n))
	}
	const q = `SELECT VALUE c.cp_lower FROM c WHERE c.id = "0"`
	if got := queryAll(t, e, q); got != `"bob"` {
		t.Fatalf("before the replace: %s", got)
	}
	replaced := strings.Replace(computedContainer, "LOWER(c.name)", "UPPER(c.name)", 1)
	if _, err := e.ReplaceContainer(t.Context(), "db", "c", []byte(replaced), ""); err != nil {
		t.Fatal(err)
	}
	if got := queryAll(t, e, q); got != `"BOB"` {
		t.Fatalf("after the replace the query still reads the old definition: %s", got)
	}
}

// Queries of many texts, more than the cache keeps, and each text again,
// all answer as parsed afresh.
func TestQueriesAnswerAlikeBeyondTheParsedQueryCache(t *testing.T) {
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	for i := range 3 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p","n":%d}`, i, i))
	}
	for round := range 2 {
		for i := range queryCacheEntries + 10 {
			q := fmt.Sprintf(`SELECT VALUE c.id FROM c WHERE c.n = %d`, i%3)
			if i >= 3 {
				q += fmt.Sprintf(" AND %d = %d", i, i)
			}
			if got, want := queryAll(t, e, q), fmt.Sprintf(`"%d"`, i%3); got != want {
				t.Fatalf("round %d, query %q: %s, want %s", round, q, got, want)
			}
		}
	}
}
