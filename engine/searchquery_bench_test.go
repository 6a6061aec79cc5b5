package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/storage/pebble"
)

// searchBenchItems is how many items the search benchmarks query: one
// partition of a container of twice as many.
const searchBenchItems = 2000

// benchSearchEngine opens an engine on Pebble with a container of
// 2×searchBenchItems items, each with a 128-dimension vector (cosine, flat
// index) and a dozen words of English text, half of them in partition "p".
func benchSearchEngine(b *testing.B) *Engine {
	b.Helper()
	ctx := b.Context()
	store, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(ctx, store, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	body := `{"id":"c","partitionKey":{"paths":["/pk"]},
		"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":128,"distanceFunction":"cosine"}]},
		"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"}]},
		"indexingPolicy":{"excludedPaths":[{"path":"/v/*"}],"vectorIndexes":[{"path":"/v","type":"flat"}],"fullTextIndexes":[{"path":"/text"}]}}`
	if _, err := e.CreateContainer(ctx, "db", []byte(body), nil); err != nil {
		b.Fatal(err)
	}
	words := strings.Fields("river mountain swimming running ocean forest lake cycling valley desert storm sunny winter summer harbor island")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2 * searchBenchItems {
		var sb strings.Builder
		sb.WriteString(`{"id":"` + strconv.Itoa(i) + `","pk":"` + []string{"p", "q"}[i%2] + `","v":[`)
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
		sb.WriteString(`"}`)
		pk := []string{"p", "q"}[i%2]
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(sb.String()), PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func benchSearchQuery(b *testing.B, q string) {
	e := benchSearchEngine(b)
	ctx := b.Context()
	var charge float64
	b.ResetTimer()
	for b.Loop() {
		res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: q, PartitionKey: StringKey("p"), HasPartitionKey: true, MaxItems: 10})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != 10 {
			b.Fatalf("%d results", len(res.Items))
		}
		charge = res.Charge
	}
	b.ReportMetric(charge, "RU/query")
}

// BenchmarkSearchVectorTop10 is an exact (brute-force) ORDER BY
// VectorDistance TOP 10 over one partition's items.
func BenchmarkSearchVectorTop10(b *testing.B) {
	var v strings.Builder
	for d := range 128 {
		if d > 0 {
			v.WriteByte(',')
		}
		fmt.Fprintf(&v, "%g", float64(d%7)/7)
	}
	benchSearchQuery(b, `SELECT TOP 10 c.id, VectorDistance(c.v, [`+v.String()+`]) AS score FROM c ORDER BY VectorDistance(c.v, [`+v.String()+`])`)
}

// BenchmarkSearchFullTextRankTop10 is ORDER BY RANK FullTextScore TOP 10 over
// one partition, its BM25 statistics counted over the whole container.
func BenchmarkSearchFullTextRankTop10(b *testing.B) {
	benchSearchQuery(b, `SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.text, "swim", "ocean")`)
}

// BenchmarkSearchFullTextContainsPhraseTop10 is a TOP 10 whose WHERE is a
// FullTextContains of a phrase a few percent of the items hold: the
// full-text index names the candidates.
func BenchmarkSearchFullTextContainsPhraseTop10(b *testing.B) {
	benchSearchQuery(b, `SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text, "harbor island")`)
}
