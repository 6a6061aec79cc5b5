package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullTextPairBody is a container with full-text paths /text (English) and
// /de (German), indexed when indexed is true, and no vector policy.
func fullTextPairBody(id string, indexed bool) []byte {
	indexes := ""
	if indexed {
		indexes = `,"fullTextIndexes":[{"path":"/text"},{"path":"/de"}]`
	}
	return []byte(fmt.Sprintf(`{"id":%q,"partitionKey":{"paths":["/pk"]},"defaultTtl":-1,
		"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"},{"path":"/de","language":"de-DE"}]},
		"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[]%s}}`, id, indexes))
}

var germanWords = strings.Fields("der Hund läuft schnell über die Brücke Häuser Haus Kinder Kind spielen spielt laufen")

func randomWords(r *rand.Rand, words []string, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = words[r.IntN(len(words))]
	}
	return strings.Join(out, " ")
}

// randomKeyword is a word or a phrase of two or three, as a SQL string.
func randomKeyword(r *rand.Rand, words []string) string {
	kw := randomWords(r, words, 1+r.IntN(3)/2*(1+r.IntN(2)))
	if r.IntN(8) == 0 {
		kw = "the" // a stop word: analyzes to nothing, matches nothing
	}
	b, _ := json.Marshal(kw)
	return "'" + strings.ReplaceAll(string(b[1:len(b)-1]), "'", "\\'") + "'"
}

// randomTextCall is a full-text function call on /text or /de.
func randomTextCall(r *rand.Rand) string {
	path, words := "c.text", searchWords
	if r.IntN(3) == 0 {
		path, words = "c.de", germanWords
	}
	switch r.IntN(3) {
	case 0:
		return fmt.Sprintf("FullTextContains(%s, %s)", path, randomKeyword(r, words))
	case 1:
		return fmt.Sprintf("FullTextContainsAll(%s, %s, %s)", path, randomKeyword(r, words), randomKeyword(r, words))
	default:
		return fmt.Sprintf("FullTextContainsAny(%s, %s, %s)", path, randomKeyword(r, words), randomKeyword(r, words))
	}
}

// randomTextWhere is a WHERE clause mixing full-text calls with AND, OR and
// NOT; required reports whether a full-text call is a conjunct of it.
func randomTextWhere(r *rand.Rand) (where string, required bool) {
	a, b := randomTextCall(r), randomTextCall(r)
	switch r.IntN(8) {
	case 0:
		return a, true
	case 1:
		return a + " AND " + b, true
	case 2:
		return a + " AND c.n > 3", true
	case 3:
		return a + " AND NOT " + b, true
	case 4:
		return a + " OR " + b, false
	case 5:
		return "NOT " + a, false
	case 6:
		return "(" + a + " OR c.n = 1) AND " + b, true
	default:
		return "(" + a + " AND c.n < 5) OR " + b, false
	}
}

// textQueryAll runs a query to its end, a page of size at a time, and
// returns its rows and whether a full-text index narrowed any page.
func textQueryAll(t *testing.T, e *Engine, coll, text string, pk string, size int) ([]string, bool, []string) {
	t.Helper()
	var rows []string
	used := false
	var filters []string
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
		if res.IndexUtilization != nil {
			for _, u := range res.IndexUtilization.UtilizedSingle {
				if strings.Contains(u.Spec, "full-text index") {
					used = true
					filters = append(filters, u.Filter)
				}
			}
		}
		if res.Continuation == "" {
			return rows, used, filters
		}
		cont = res.Continuation
	}
}

// TestFullTextNarrowingAnswersAsExactEvaluation: queries whose WHERE holds
// FullTextContains, FullTextContainsAll or FullTextContainsAny (words and
// phrases, English and German, mixed with AND, OR and NOT, paged, scoped to
// a partition or not, ordered or counted) answer on a container with
// full-text indexes exactly as on the same items without them, before and
// after replaces, deletes, TTL expiry (swept or not yet) and a rebuild of
// the indexes; the index metrics name a full-text index only for a query
// with a full-text conjunct, and do for every plain full-text filter.
func TestFullTextNarrowingAnswersAsExactEvaluation(t *testing.T) {
	checkFullTextAgainstExact(t, "FullTextContains", func(r *rand.Rand) (string, bool, bool) {
		where, required := randomTextWhere(r)
		shape := r.IntN(5)
		var q string
		switch shape {
		case 0, 1:
			q = "SELECT c.id FROM c WHERE " + where
		case 2:
			q = "SELECT c.id, c.n FROM c WHERE " + where + " ORDER BY c.n DESC"
		case 3:
			q = "SELECT VALUE COUNT(1) FROM c WHERE " + where
		default:
			q = "SELECT TOP 5 c.id FROM c WHERE " + where
		}
		plain := shape <= 1 && required && !strings.Contains(where, "c.n")
		return q, required, plain
	})
}

// TestRankByFullTextScoreFromTheIndexAnswersAsExactEvaluation: ORDER BY
// RANK FullTextScore with TOP or OFFSET/LIMIT, alone or under a WHERE with
// full-text calls, answers on a container with full-text indexes exactly as
// on the same items without them (the items holding none of the keywords
// score 0 and come last, in creation order), before and after replaces,
// deletes and TTL expiry (swept or not yet: the statistics leave out the
// expired items either way); so does RRF of FullTextScores (rrfQuery).
func TestRankByFullTextScoreFromTheIndexAnswersAsExactEvaluation(t *testing.T) {
	checkFullTextAgainstExact(t, "ORDER BY RANK", func(r *rand.Rand) (string, bool, bool) {
		path, words := "c.text", searchWords
		if r.IntN(3) == 0 {
			path, words = "c.de", germanWords
		}
		score := fmt.Sprintf("FullTextScore(%s, %s, %s)", path, randomKeyword(r, words), randomKeyword(r, words))
		if r.IntN(2) == 0 {
			score = fmt.Sprintf("FullTextScore(%s, %s)", path, randomKeyword(r, words))
		}
		where, required := "", false
		if r.IntN(3) == 0 {
			where, required = randomTextWhere(r)
			where = " WHERE " + where
		}
		switch r.IntN(4) {
		case 0:
			return fmt.Sprintf("SELECT TOP %d c.id FROM c%s ORDER BY RANK %s", 1+r.IntN(30), where, score), true, false
		case 1:
			return fmt.Sprintf("SELECT c.id FROM c%s ORDER BY RANK %s OFFSET %d LIMIT %d", where, score, r.IntN(20), 1+r.IntN(20)), true, false
		case 2:
			return fmt.Sprintf("SELECT c.id FROM c%s ORDER BY RANK %s", where, score), required, false
		default:
			return fmt.Sprintf("SELECT TOP 10 c.id FROM c%s ORDER BY RANK RRF(%s, %s)", where, score, score), true, false
		}
	})
}

// checkFullTextAgainstExact writes the same random items to a container
// with full-text indexes and to one without, and asserts that the queries
// gen makes answer alike on both, before and after replaces, deletes and
// TTL expiry (swept or not yet) and a rebuild of the indexes (a policy
// that drops them, then one that adds them again), and that some query used a full-text
// index for wantFilter (off a store over several places). gen also says whether the query may use a
// full-text index, and whether it must (off a store over several places). While expired
// items await the sweeper, the BM25 statistics leave them out with the
// index as without.
func checkFullTextAgainstExact(t *testing.T, wantFilter string, gen func(r *rand.Rand) (q string, mayUse, mustUse bool)) {
	ctx := t.Context()
	clock, advance := fixedClock()
	e := openSeededSearch(t, Options{Now: clock}, fullTextPairBody("indexed", true), fullTextPairBody("exact", false))
	r := rand.New(rand.NewPCG(11, 12))
	n := 200
	if testOnPostgres {
		n = 80
	}
	item := func(i int) (string, string) {
		pk := fmt.Sprintf("p%d", i%3)
		text, _ := json.Marshal(randomWords(r, searchWords, 2+r.IntN(6)))
		de, _ := json.Marshal(randomWords(r, germanWords, 2+r.IntN(6)))
		body := fmt.Sprintf(`{"id":"%d","pk":%q,"n":%d,"text":%s,"de":%s`, i, pk, r.IntN(8), text, de)
		switch r.IntN(10) {
		case 0:
			body += `,"ttl":5`
		case 1:
			body = fmt.Sprintf(`{"id":"%d","pk":%q,"n":%d,"text":7`, i, pk, r.IntN(8))
		}
		return pk, body + "}"
	}
	write := func(op string, i int) {
		pk, body := item(i)
		for _, coll := range []string{"indexed", "exact"} {
			rq := &ItemRequest{Database: "db", Container: coll, ID: fmt.Sprint(i), PartitionKey: StringKey(pk), HasPartitionKey: true, Body: []byte(body)}
			var err error
			switch op {
			case "create":
				_, err = e.CreateItem(ctx, rq)
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
		write("create", i)
	}
	uses := 0
	compare := func(stage string) {
		t.Helper()
		warmSearchIndexesIn(t, "indexed", e) // a query waits for a build only so long
		for range 60 {
			q, mayUse, mustUse := gen(r)
			pk := ""
			if r.IntN(3) == 0 {
				pk = fmt.Sprintf("p%d", r.IntN(3))
			}
			size := []int{3, 1000}[r.IntN(2)]
			got, used, filters := textQueryAll(t, e, "indexed", q, pk, size)
			want, usedExact, _ := textQueryAll(t, e, "exact", q, pk, size)
			for _, f := range filters {
				if strings.Contains(f, wantFilter) {
					uses++
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %s (partition %q): with the index %v, exactly %v", stage, q, pk, got, want)
			}
			if usedExact || used && !mayUse {
				t.Fatalf("%s: %s: a full-text index used where none may serve (exact container %v)", stage, q, usedExact)
			}
			if mustUse && used != (e.search.kept()) {
				t.Fatalf("%s: %s: full-text index used %v, on a store over several places %v", stage, q, used, testOnPlaced)
			}
		}
	}
	compare("created")
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
	// The indexes dropped and added again: rebuilt from the items.
	for _, indexed := range []bool{false, true} {
		if _, err := e.ReplaceContainer(ctx, "db", "indexed", fullTextPairBody("indexed", indexed), ""); err != nil {
			t.Fatal(err)
		}
	}
	compare("rebuilt")
	if (e.search.kept()) && uses == 0 {
		t.Fatalf("no query used a full-text index for %s", wantFilter)
	}
}
