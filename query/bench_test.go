package query

import (
	"encoding/json"
	"fmt"
	"testing"
)

const benchQuery = "SELECT c.id, c.name, c.price FROM c WHERE c.category = @cat AND c.price > 10 AND STARTSWITH(c.id, 'p-') ORDER BY c.price DESC OFFSET 0 LIMIT 20"

var benchParams = map[string]json.RawMessage{"@cat": json.RawMessage(`"gear"`)}

// BenchmarkParse measures parsing, binding and planning a typical query.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		q, err := Parse(benchQuery)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := q.Plan(benchParams); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDocs(n int) [][]byte {
	docs := make([][]byte, n)
	cats := []string{"gear", "apparel", "food"}
	for i := range docs {
		docs[i] = fmt.Appendf(nil, `{"id":"p-%d","pk":"%s","name":"item %d","category":"%s","price":%d.5,"qty":%d,"tags":["a","b","c"],"dims":{"w":1,"h":2},"_etag":"\"0000\"","_ts":1700000000}`,
			i, cats[i%3], i, cats[i%3], i%500, i%17)
	}
	return docs
}

func sliceDocs(docs [][]byte) Docs {
	return func(yield func([]byte, error) bool) {
		for _, d := range docs {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// BenchmarkExecute measures filtering, sorting and projecting 1,000 documents.
func BenchmarkExecute(b *testing.B) {
	docs := benchDocs(1000)
	for _, text := range []string{
		benchQuery,
		"SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'p-1')",
		"SELECT c.category, COUNT(1) AS n, AVG(c.price) AS avg FROM c GROUP BY c.category",
		"SELECT * FROM c WHERE c.qty = 3",
	} {
		q, err := Parse(text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(text[:min(len(text), 40)], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := q.Execute(sliceDocs(docs), Options{Params: benchParams}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(docs)), "ns/doc")
		})
	}
}

// BenchmarkRows measures the streaming path: one document through a
// filtered projection, as the engine pages a single-partition query.
func BenchmarkRows(b *testing.B) {
	q, err := Parse("SELECT c.id, c.name FROM c WHERE c.category = @cat AND c.price > 10")
	if err != nil {
		b.Fatal(err)
	}
	x, err := q.Prepare(Options{Params: benchParams})
	if err != nil {
		b.Fatal(err)
	}
	doc := benchDocs(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Rows(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConditionMatches measures a patch filter predicate on one item.
func BenchmarkConditionMatches(b *testing.B) {
	c, err := ParseCondition("FROM c WHERE c.qty > 2 AND STARTSWITH(c.id, 'p-')")
	if err != nil {
		b.Fatal(err)
	}
	doc := benchDocs(4)[3]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Matches(doc, nil); err != nil {
			b.Fatal(err)
		}
	}
}
