package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// A container's search policies are part of its stored record: after a
// restart on Pebble the engine has them again, parsed, and a query scoped
// to one partition still ranks with the BM25 statistics of the whole
// container.
func TestSearchPoliciesSurviveARestartAndRankOverTheContainer(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	withEngine(t, dir, func(e *engine.Engine) {
		if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
			t.Fatal(err)
		}
		body := `{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},
			"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":2,"distanceFunction":"dotproduct"}]},
			"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/t","language":"fr-FR"}]},
			"indexingPolicy":{"vectorIndexes":[{"path":"/v","type":"quantizedFlat"}],"fullTextIndexes":[{"path":"/t"}]}}`
		if _, err := e.CreateContainer(ctx, "db", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
		items := []string{`{"id":"A","pk":"p","t":"alpha gamma","v":[1,0]}`, `{"id":"B","pk":"p","t":"beta gamma","v":[0,2]}`}
		for i := range 6 {
			items = append(items, fmt.Sprintf(`{"id":"x%d","pk":"q","t":"alpha delta"}`, i))
		}
		for _, it := range items {
			var m struct{ PK string }
			json.Unmarshal([]byte(it), &m)
			if _, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: engine.StringKey(m.PK), HasPartitionKey: true, Body: []byte(it)}); err != nil {
				t.Fatal(err)
			}
		}
	})
	withEngine(t, dir, func(e *engine.Engine) {
		c, err := e.Container(ctx, "db", "c")
		if err != nil {
			t.Fatal(err)
		}
		sp := c.Search()
		if !sp.HasVector() || !sp.HasFullText() {
			t.Fatalf("after a restart the container has no search policy: %+v", sp)
		}
		if ix, ok := sp.Vector.Index("/v"); !ok || ix.Config.Kind.String() != "quantizedFlat" || ix.Config.Metric.String() != "dotproduct" {
			t.Errorf("vector index after a restart: %+v", ix)
		}
		if p, ok := sp.FullText.Path("/t"); !ok || p.Language != "fr-FR" || !p.Indexed {
			t.Errorf("full-text path after a restart: %+v", p)
		}
		query := func(q string) string {
			res, err := e.QueryItems(ctx, &engine.QueryRequest{Database: "db", Container: "c", Query: q, PartitionKey: engine.StringKey("p"), HasPartitionKey: true, MaxItems: 10})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var out []string
			for _, it := range res.Items {
				out = append(out, string(it))
			}
			return strings.Join(out, ",")
		}
		// In partition "p" alone alpha and beta are equally rare; in the
		// container alpha is common, so B ranks first.
		if got := query(`SELECT TOP 2 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.t, "alpha", "beta")`); got != `"B","A"` {
			t.Errorf("ORDER BY RANK in one partition: %s, want B first", got)
		}
		// The policy's dot product: B (2) before A (1).
		if got := query(`SELECT TOP 2 VALUE c.id FROM c ORDER BY VectorDistance(c.v, [0.5, 1])`); got != `"B","A"` {
			t.Errorf("ORDER BY VectorDistance: %s", got)
		}
	})
}
