package fulltext

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkFullTextSearch indexes a corpus of real English text, the
// comment paragraphs of the Go standard library's sources (the first 20,000
// of at least 8 words, by path: present wherever Go is, the same for one Go
// version), and times FullTextScore's top 10 for 1,000 queries of one to
// three keywords drawn from the corpus's terms of middling frequency. It
// writes the analyzed corpus, the queries and its answers to
// ORRERY_FULLTEXT_BENCH_DIR (the temporary directory's
// orrery-fulltext-bench/ by default), where bench/compare.py ranks the same
// terms with SQLite FTS5's bm25 and reports how far the top 10s agree.
func BenchmarkFullTextSearch(b *testing.B) {
	ctx := context.Background()
	docs := goComments(b, 20000)
	an, err := AnalyzerFor("en-US")
	if err != nil {
		b.Fatal(err)
	}
	st := newMemStore()
	ix, err := Open(ctx, st, "en-US")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i, d := range docs {
		var bt batch
		p, err := ix.Prepare(&bt, Change{Key: []byte(fmt.Sprintf("%05d", i)), Text: text(d)})
		if err != nil {
			b.Fatal(err)
		}
		bt.apply(st)
		p.Commit()
	}
	build := time.Since(start)

	// Queries: words of the corpus whose term is found in 20 to 2,000
	// documents (a word, not its stem: keywords are analyzed as text is).
	wordOf := map[string]string{}
	for _, d := range docs {
		for _, w := range strings.Fields(strings.ToLower(d)) {
			w = strings.Trim(w, ".,;:()[]{}\"'`!?*")
			ts := an.Analyze(w)
			if len(ts) != 1 || wordOf[ts[0].Text] != "" {
				continue
			}
			if n := ix.df[ts[0].Text]; n >= 20 && n <= 2000 {
				wordOf[ts[0].Text] = w
			}
		}
	}
	var mid []string
	for _, w := range wordOf {
		mid = append(mid, w)
	}
	sort.Strings(mid)
	rng := rand.New(rand.NewPCG(7, 27))
	queries := make([][]string, 1000)
	for i := range queries {
		for range 1 + rng.IntN(3) {
			queries[i] = append(queries[i], mid[rng.IntN(len(mid))])
		}
	}
	// The answers written are Top's (the best-first walk the engine
	// ranks with), checked against Search's scoring of every holder.
	results := make([][]Result, len(queries))
	for i, q := range queries {
		if results[i], err = top10(ctx, ix, st, q); err != nil {
			b.Fatal(err)
		}
		all, err := ix.Search(ctx, st, q, 10, nil)
		if err != nil {
			b.Fatal(err)
		}
		if fmt.Sprint(all) != fmt.Sprint(results[i]) {
			b.Fatalf("%v: Top %v, Search %v", q, results[i], all)
		}
	}
	if err := writeFullTextBench(an, docs, queries, results); err != nil {
		b.Fatal(err)
	}
	// Common words: the 20 terms most documents hold.
	var terms []string
	for t := range ix.df {
		terms = append(terms, t)
	}
	sort.Slice(terms, func(i, j int) bool {
		return ix.df[terms[i]] > ix.df[terms[j]] || ix.df[terms[i]] == ix.df[terms[j]] && terms[i] < terms[j]
	})
	var common [][]string
	held := 0
	for _, t := range terms[:20] {
		common = append(common, []string{t})
		held += int(ix.df[t])
	}
	for _, set := range []struct {
		name    string
		queries [][]string
	}{{"middling", queries}, {"common", common}} {
		b.Run(set.name+"/search", func(b *testing.B) {
			qs := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := ix.Search(ctx, st, set.queries[i%len(set.queries)], 10, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(qs).Seconds(), "queries/s")
			if set.name == "common" {
				b.ReportMetric(float64(held)/float64(len(common)), "holders/query")
			}
		})
		b.Run(set.name+"/top", func(b *testing.B) {
			qs := time.Now()
			scored := 0
			for i := 0; i < b.N; i++ {
				q := set.queries[i%len(set.queries)]
				stats, err := ix.Stats(ctx, st, q)
				if err != nil {
					b.Fatal(err)
				}
				_, rep, err := ix.Top(ctx, st, q, TopOptions{K: 10, Stats: stats})
				if err != nil {
					b.Fatal(err)
				}
				scored += rep.Scored
			}
			b.ReportMetric(float64(b.N)/time.Since(qs).Seconds(), "queries/s")
			b.ReportMetric(float64(scored)/float64(b.N), "scored/query")
		})
	}
	bounds, postings := 0, 0
	for t, bs := range ix.bounds {
		bounds += len(bs)
		postings += int(ix.df[t])
	}
	b.Logf("%d documents indexed, %.0f/s; %d postings, %d block bounds of %d bytes", len(docs), float64(len(docs))/build.Seconds(),
		postings, bounds, unsafe.Sizeof(blockBound{}))
}

// top10 is FullTextScore's top 10 through Top, ties in key order as
// Search orders them.
func top10(ctx context.Context, ix *Index, st Reader, q []string) ([]Result, error) {
	stats, err := ix.Stats(ctx, st, q)
	if err != nil || stats.Documents == 0 {
		return nil, err
	}
	res, _, err := ix.Top(ctx, st, q, TopOptions{K: 10, Stats: stats})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(res, func(i, j int) bool {
		if res[i].Score != res[j].Score {
			return res[i].Score > res[j].Score
		}
		return string(res[i].Key) < string(res[j].Key)
	})
	return res[:min(len(res), 10)], nil
}

// goComments returns up to n comment paragraphs of at least 8 words from
// the Go sources under GOROOT/src, by path.
func goComments(b *testing.B, n int) []string {
	root := filepath.Join(runtime.GOROOT(), "src")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	sort.Strings(files)
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var para []string
		flush := func() {
			if p := strings.Join(para, " "); len(strings.Fields(p)) >= 8 && !strings.Contains(p, "Copyright") {
				out = append(out, p)
			}
			para = para[:0]
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(line, "//"); ok && strings.TrimSpace(rest) != "" && !strings.HasPrefix(rest, "go:") {
				para = append(para, strings.TrimSpace(rest))
				continue
			}
			flush()
			if len(out) >= n {
				return out[:n]
			}
		}
		flush()
	}
	if len(out) < n {
		b.Fatalf("only %d paragraphs in %s", len(out), root)
	}
	return out[:n]
}

// writeFullTextBench writes the analyzed corpus (one document a line: its
// terms), the queries (their terms) and the index's top 10s.
func writeFullTextBench(an *Analyzer, docs []string, queries [][]string, results [][]Result) error {
	dir := os.Getenv("ORRERY_FULLTEXT_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "orrery-fulltext-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, fill func(w *bufio.Writer)) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		fill(w)
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Close()
	}
	err := write("corpus.txt", func(w *bufio.Writer) {
		for _, d := range docs {
			var ts []string
			for _, t := range an.Analyze(d) {
				ts = append(ts, t.Text)
			}
			fmt.Fprintln(w, strings.Join(ts, " "))
		}
	})
	if err != nil {
		return err
	}
	err = write("queries.txt", func(w *bufio.Writer) {
		for _, q := range queries {
			var ts []string
			for _, kw := range q {
				for _, t := range an.Analyze(kw) {
					ts = append(ts, t.Text)
				}
			}
			fmt.Fprintln(w, strings.Join(ts, " "))
		}
	})
	if err != nil {
		return err
	}
	return write("results.txt", func(w *bufio.Writer) {
		for _, rs := range results {
			var ks []string
			for _, r := range rs {
				ks = append(ks, fmt.Sprintf("%s:%.9g", r.Key, r.Score))
			}
			fmt.Fprintln(w, strings.Join(ks, " "))
		}
	})
}
