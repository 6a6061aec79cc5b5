package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/memory"
)

// hybridBody is a container with a float32 embedding of metric at /v
// (searchDims dimensions) and an English full-text path /text, with a
// vector index of kind and a full-text index when kind is not "".
func hybridBody(id, metric, kind string) []byte {
	indexes := ""
	if kind != "" {
		indexes = `,"vectorIndexes":[{"path":"/v","type":"` + kind + `"}],"fullTextIndexes":[{"path":"/text"}]`
	}
	return []byte(fmt.Sprintf(`{"id":%q,"partitionKey":{"paths":["/pk"]},"defaultTtl":-1,
		"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":%d,"distanceFunction":%q}]},
		"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"}]},
		"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/v/*"}]%s}}`, id, searchDims, metric, indexes))
}

// hybridTopics are groups of words; an item about a topic has most of its
// words from the group and its vector near the topic's centre, so that
// its text and vector ranks agree, as they do in real hybrid search.
var hybridTopics = [][]string{
	strings.Fields("red green blue"),
	strings.Fields("river mountain stone"),
	strings.Fields("glass paper quick"),
	strings.Fields("slow running jumps"),
}

func hybridCentre(topic int) []float64 {
	v := make([]float64, searchDims)
	v[topic] = 3
	v[(topic+1)%searchDims] = 1
	return v
}

// near is a point around centre, coarsely rounded so that some items tie.
func near(r *rand.Rand, centre []float64, spread float64, step float64) []float64 {
	v := make([]float64, len(centre))
	for i := range v {
		v[i] = float64(int((centre[i]+r.NormFloat64()*spread)/step)) * step
	}
	return v
}

// rrfQueryAll runs a query to its end, a page of size at a time, and
// returns its rows and whether the indexes narrowed RRF (on the first page:
// the next ones come from its results).
func rrfQueryAll(t *testing.T, e *Engine, coll, text, pk string, size int) ([]string, bool) {
	t.Helper()
	var rows []string
	used := false
	cont := ""
	for {
		q := &QueryRequest{Database: "db", Container: coll, Query: text, IndexMetrics: true, MaxItems: size, Continuation: cont, SinglePartitionKeyRange: true}
		if pk != "" {
			q.PartitionKey, q.HasPartitionKey, q.SinglePartitionKeyRange = StringKey(pk), true, false
		}
		res, err := e.QueryItems(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		for _, row := range res.Items {
			rows = append(rows, string(row))
		}
		if res.IndexUtilization != nil && cont == "" {
			for _, u := range res.IndexUtilization.UtilizedSingle {
				used = used || strings.Contains(u.Filter, "RANK RRF(")
			}
		}
		if res.Continuation == "" {
			return rows, used
		}
		cont = res.Continuation
	}
}

// TestRRFFromTheIndexesAnswersAsExactEvaluation: ORDER BY RANK RRF of
// FullTextScore and VectorDistance (cosine and Euclidean, with weights,
// under WHERE clauses with or without full-text conjuncts, with TOP or
// OFFSET/LIMIT, paged, scoped to a partition or not) answers on a container
// with a flat vector index (or a diskANN one searched with bruteForce) and
// a full-text index exactly as on the same
// items without indexes, before and after replaces, deletes and TTL expiry
// (swept or not yet);
// and the indexes do narrow many of those queries (those whose text and
// vector ranks agree), the rest being read whole.
func TestRRFFromTheIndexesAnswersAsExactEvaluation(t *testing.T) {
	for _, c := range []struct{ metric, kind string }{{"cosine", "flat"}, {"euclidean", "flat"}, {"cosine", "diskANN"}} {
		t.Run(c.metric+"-"+c.kind, func(t *testing.T) { checkRRFAgainstExact(t, c.metric, c.kind) })
	}
}

// checkRRFAgainstExact compares RRF queries on a container with a vector
// index of kind and a full-text index to the same on one without; on
// diskANN the queries ask for bruteForce (an exact search of the index).
func checkRRFAgainstExact(t *testing.T, metric, kind string) {
	ctx := t.Context()
	clock, advance := fixedClock()
	e := openSeededSearch(t, Options{Now: clock}, hybridBody("indexed", metric, kind), hybridBody("exact", metric, ""))
	r := rand.New(rand.NewPCG(27, 60))
	n := 400
	if testOnPostgres {
		n = 120
	}
	item := func(i int) (string, string) {
		pk := fmt.Sprintf("p%d", i%3)
		topic := r.IntN(len(hybridTopics))
		words := make([]string, 2+r.IntN(6))
		for k := range words {
			if r.IntN(4) == 0 {
				words[k] = searchWords[r.IntN(len(searchWords))]
			} else {
				words[k] = hybridTopics[topic][r.IntN(3)]
			}
		}
		text, _ := json.Marshal(strings.Join(words, " "))
		vec, _ := json.Marshal(near(r, hybridCentre(topic), 0.8, 0.25))
		body := fmt.Sprintf(`{"id":"%d","pk":%q,"n":%d`, i, pk, r.IntN(8))
		if r.IntN(10) != 0 {
			body += `,"text":` + string(text)
		}
		if r.IntN(10) != 0 {
			body += `,"v":` + string(vec)
		}
		if r.IntN(12) == 0 {
			body += `,"ttl":5`
		}
		return pk, body + "}"
	}
	write := func(op string, i int) {
		pk, body := item(i)
		for _, coll := range []string{"indexed", "exact"} {
			rq := &ItemRequest{Database: "db", Container: coll, ID: fmt.Sprint(i), PartitionKey: StringKey(pk), HasPartitionKey: true, Body: []byte(body)}
			var err error
			switch op {
			case "upsert":
				_, err = e.UpsertItem(ctx, rq)
			case "delete":
				rq.Body = nil
				_, err = e.DeleteItem(ctx, rq)
				if statusOf(err) == 404 {
					err = nil
				}
			}
			if err != nil {
				t.Fatalf("%s %d in %s: %v", op, i, coll, err)
			}
		}
	}
	for i := range n {
		write("upsert", i)
	}
	gen := func() string {
		topic := r.IntN(len(hybridTopics))
		kw := fmt.Sprintf("%q", hybridTopics[topic][r.IntN(3)])
		if r.IntN(3) == 0 {
			kw += fmt.Sprintf(", %q", hybridTopics[topic][r.IntN(3)])
		}
		if r.IntN(5) == 0 { // text and vector about different topics
			topic = (topic + 1) % len(hybridTopics)
		}
		vec, _ := json.Marshal(near(r, hybridCentre(topic), 0.3, 0.1))
		brute := ""
		if kind != "flat" {
			brute = ", true"
		}
		comps := fmt.Sprintf("FullTextScore(c.text, %s), VectorDistance(c.v, %s%s)", kw, vec, brute)
		switch r.IntN(6) {
		case 0:
			comps += ", [2, 1]"
		case 1:
			comps += ", [1, 0.5]"
		case 2:
			comps = fmt.Sprintf("VectorDistance(c.v, %s%s), %s", vec, brute, comps)
		}
		where := ""
		switch r.IntN(5) {
		case 0:
			where = " WHERE c.n > 2"
		case 1:
			where = fmt.Sprintf(" WHERE FullTextContains(c.text, %q)", hybridTopics[r.IntN(len(hybridTopics))][0])
		}
		if r.IntN(2) == 0 {
			return fmt.Sprintf("SELECT TOP %d c.id FROM c%s ORDER BY RANK RRF(%s)", 1+r.IntN(12), where, comps)
		}
		return fmt.Sprintf("SELECT c.id FROM c%s ORDER BY RANK RRF(%s) OFFSET %d LIMIT %d", where, comps, r.IntN(6), 1+r.IntN(10))
	}
	narrowed, total := 0, 0
	compare := func(stage string) {
		t.Helper()
		for range 40 {
			q := gen()
			pk := ""
			if r.IntN(3) == 0 {
				pk = fmt.Sprintf("p%d", r.IntN(3))
			}
			size := []int{2, 1000}[r.IntN(2)]
			got, used := rrfQueryAll(t, e, "indexed", q, pk, size)
			want, usedExact := rrfQueryAll(t, e, "exact", q, pk, size)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %s (partition %q): with the indexes %v, exactly %v", stage, q, pk, got, want)
			}
			if usedExact {
				t.Fatalf("%s: %s: an index used on the container without", stage, q)
			}
			total++
			if used {
				narrowed++
			}
		}
	}
	compare("written")
	for range n / 4 {
		switch i := r.IntN(n + 20); r.IntN(3) {
		case 0:
			write("delete", i)
		default:
			write("upsert", i)
		}
	}
	compare("replaced and deleted")
	advance(time.Minute)
	compare("expired")
	if _, err := e.sweeper.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	compare("swept")
	t.Logf("%d of %d queries narrowed by the indexes", narrowed, total)
	// A store over several places keeps no search index (searchindex.Off).
	indexed := e.search.kept()
	if indexed && narrowed < total/4 {
		t.Fatalf("only %d of %d queries narrowed by the indexes", narrowed, total)
	}
	if !indexed && narrowed > 0 {
		t.Fatalf("%d queries narrowed on a store that keeps no search index", narrowed)
	}
}

// BenchmarkRRFNarrowedByTheIndexes times SELECT TOP 10 ... ORDER BY RANK
// RRF(FullTextScore, VectorDistance) over 10,000 items of four topics
// (words and vectors agreeing) on a container with a flat vector index and
// a full-text index ("indexed") and on one without ("exact"), and reports
// the documents each query reads (the statistics' included) and the share
// of queries the indexes narrowed.
func BenchmarkRRFNarrowedByTheIndexes(b *testing.B) {
	if testOnShared || testOnPostgres {
		b.Skip("the benchmark keeps its own memory store")
	}
	ctx := b.Context()
	store := memory.New()
	defer store.Close()
	// The exact container's queries read 20,000 documents each: more than
	// a page's default budget on a busy machine.
	e, err := Open(ctx, store, Options{QueryTimeBudget: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	for coll, kind := range map[string]string{"indexed": "flat", "exact": ""} {
		if _, err := e.CreateContainer(ctx, "db", hybridBody(coll, "cosine", kind), nil); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 10000
	for i := range n {
		topic := r.IntN(len(hybridTopics))
		words := make([]string, 4+r.IntN(8))
		for k := range words {
			if r.IntN(3) == 0 {
				words[k] = searchWords[r.IntN(len(searchWords))]
			} else {
				words[k] = hybridTopics[topic][r.IntN(3)]
			}
		}
		text, _ := json.Marshal(strings.Join(words, " "))
		vec, _ := json.Marshal(near(r, hybridCentre(topic), 0.8, 0.01))
		pk := fmt.Sprintf("p%d", i%10)
		body := fmt.Sprintf(`{"id":"%d","pk":%q,"text":%s,"v":%s}`, i, pk, text, vec)
		for _, coll := range []string{"indexed", "exact"} {
			if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: coll, ID: fmt.Sprint(i), PartitionKey: StringKey(pk), HasPartitionKey: true, Body: []byte(body)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	queries := make([]string, 50)
	for i := range queries {
		topic := r.IntN(len(hybridTopics))
		vec, _ := json.Marshal(near(r, hybridCentre(topic), 0.3, 0.01))
		queries[i] = fmt.Sprintf("SELECT TOP 10 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, %q), VectorDistance(c.v, %s))",
			hybridTopics[topic][r.IntN(3)], vec)
	}
	for _, coll := range []string{"indexed", "exact"} {
		b.Run(coll, func(b *testing.B) {
			docs, narrowed := int64(0), 0
			for i := 0; i < b.N; i++ {
				res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: coll, Query: queries[i%len(queries)], IndexMetrics: true, MaxItems: 100, SinglePartitionKeyRange: true})
				if err != nil {
					b.Fatal(err)
				}
				docs += res.Metrics.RetrievedDocumentCount
				for _, u := range res.IndexUtilization.UtilizedSingle {
					if strings.Contains(u.Filter, "RANK RRF(VectorDistance") {
						narrowed++
					}
				}
			}
			b.ReportMetric(float64(docs)/float64(b.N), "documents/query")
			b.ReportMetric(float64(narrowed)/float64(b.N), "narrowed")
		})
	}
}
