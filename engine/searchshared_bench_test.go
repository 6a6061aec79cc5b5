package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// sharedSearchBenchItems is how many items the shared-store search
// benchmarks query.
const sharedSearchBenchItems = 10_000

// BenchmarkSharedSearchTop10 compares, on PostgreSQL, a TOP 10 over
// sharedSearchBenchItems items (128-dimension vectors, flat index, cosine;
// a dozen English words each) answered by a gateway's search indexes with
// the exact evaluation of the same query: ORDER BY VectorDistance against
// its bruteForce form, and a FullTextContains narrowed by the full-text
// index against the same call in a disjunction no index narrows, for a
// phrase a few percent of the items hold (common) and a word ten items
// hold (rare). The items
// are written through gateway A, the queries run on gateway B, whose
// indexes are built from the store first (reported as build-ms; a query
// waits searchindex.BuildWait for them, and evaluates exactly meanwhile).
func BenchmarkSharedSearchTop10(b *testing.B) {
	if err := pgtest.Available(); err != nil {
		b.Skip(err)
	}
	ctx := b.Context()
	url := pgtest.URL(b)
	var engines [2]*Engine
	for i := range engines {
		s, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := Open(ctx, s, Options{SweepInterval: -1, QueryTimeBudget: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close(); s.Close() })
		engines[i] = e
	}
	a, g := engines[0], engines[1]
	if _, err := a.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	body := `{"id":"c","partitionKey":{"paths":["/pk"]},
		"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":128,"distanceFunction":"cosine"}]},
		"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"}]},
		"indexingPolicy":{"excludedPaths":[{"path":"/v/*"}],"vectorIndexes":[{"path":"/v","type":"flat"}],"fullTextIndexes":[{"path":"/text"}]}}`
	if _, err := a.CreateContainer(ctx, "db", []byte(body), nil); err != nil {
		b.Fatal(err)
	}
	words := strings.Fields("river mountain swimming running ocean forest lake cycling valley desert storm sunny winter summer harbor island")
	rng := rand.New(rand.NewPCG(1, 2))
	const perBatch = 100
	for n := 0; n < sharedSearchBenchItems; n += perBatch {
		pk := "p" + strconv.Itoa(n/perBatch%50)
		var ops []BatchOperation
		for i := n; i < n+perBatch; i++ {
			var sb strings.Builder
			sb.WriteString(`{"id":"` + strconv.Itoa(i) + `","pk":"` + pk + `","v":[`)
			for d := range 128 {
				if d > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.FormatFloat(rng.NormFloat64(), 'g', 6, 64))
			}
			sb.WriteString(`],"text":"`)
			for w := range 12 {
				if w > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(words[rng.IntN(len(words))])
			}
			if i%1000 == 0 {
				sb.WriteString(" lighthouse")
			}
			sb.WriteString(`"}`)
			ops = append(ops, BatchOperation{Type: BatchCreate, Body: []byte(sb.String())})
		}
		if _, err := a.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey(pk), HasPartitionKey: true, Operations: ops}); err != nil {
			b.Fatal(err)
		}
	}
	var v strings.Builder
	for d := range 128 {
		if d > 0 {
			v.WriteByte(',')
		}
		fmt.Fprintf(&v, "%g", float64(d%7)/7)
	}
	query := func(q string) *QueryResult {
		res, err := g.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: q, SinglePartitionKeyRange: true, IndexMetrics: true, MaxItems: 10})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != 10 {
			b.Fatalf("%s: %d results", q, len(res.Items))
		}
		return res
	}
	c, err := g.Container(ctx, "db", "c")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := g.search.of(c); err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	for _, bc := range []struct {
		name, query string
		indexed     bool
	}{
		{"vector/index", `SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, [` + v.String() + `])`, true},
		{"vector/exact", `SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, [` + v.String() + `], true)`, false},
		{"fulltext-common/index", `SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text, "harbor island")`, true},
		{"fulltext-common/exact", `SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text, "harbor island") OR c.none = 1`, false},
		{"fulltext-rare/index", `SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text, "lighthouse")`, true},
		{"fulltext-rare/exact", `SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text, "lighthouse") OR c.none = 1`, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if res := query(bc.query); (len(searchIndexUses(res.IndexUtilization)) > 0) != bc.indexed {
				b.Fatalf("%s: search indexes used %v", bc.query, searchIndexUses(res.IndexUtilization))
			}
			for b.Loop() {
				query(bc.query)
			}
			b.ReportMetric(float64(build.Milliseconds()), "build-ms")
		})
	}
}
