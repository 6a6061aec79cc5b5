package query

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// corpusFile is one golden file: a document set and queries over it with
// their expected results (in order) or expected error substring.
type corpusFile struct {
	Docs  []json.RawMessage `json:"docs"`
	Cases []corpusCase      `json:"cases"`
}

type corpusCase struct {
	Query    string                     `json:"query"`
	Params   map[string]json.RawMessage `json:"params,omitempty"`
	Expected []json.RawMessage          `json:"expected,omitempty"`
	Error    string                     `json:"error,omitempty"`
	// Unordered compares results as a multiset (no ORDER BY in the query).
	Unordered bool `json:"unordered,omitempty"`
}

// corpusNow is the clock seen by the corpus's date/time functions.
var corpusNow = time.Date(2024, 5, 6, 7, 8, 9, 123456700, time.UTC)

func normalizeJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	v, err := decodeJSON(raw)
	if err != nil {
		t.Fatalf("bad JSON in golden file: %s", raw)
	}
	return string(encodeJSON(v))
}

func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	total := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cf corpusFile
		if err := json.Unmarshal(data, &cf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs := func(yield func([]byte, error) bool) {
			for _, d := range cf.Docs {
				if !yield(d, nil) {
					return
				}
			}
		}
		for _, tc := range cf.Cases {
			total++
			t.Run(filepath.Base(file)+"/"+tc.Query, func(t *testing.T) {
				q, err := Parse(tc.Query)
				var res []json.RawMessage
				if err == nil {
					res, err = q.Execute(docs, Options{Params: tc.Params, Now: corpusNow})
				}
				if tc.Error != "" {
					if err == nil || !strings.Contains(err.Error(), tc.Error) {
						t.Fatalf("want error containing %q, got %v", tc.Error, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				// The same query decoding whole documents must agree with
				// the partial decoding the query chose.
				if q.fields != nil {
					full := *q
					full.fields = nil
					fres, ferr := full.Execute(docs, Options{Params: tc.Params, Now: corpusNow})
					if ferr != nil || joinRaw(fres) != joinRaw(res) {
						t.Fatalf("partial decoding (fields %v) gave %s, full decoding %s (%v)", q.fields, joinRaw(res), joinRaw(fres), ferr)
					}
				}
				got := make([]string, len(res))
				for i, r := range res {
					got[i] = string(r)
				}
				want := make([]string, len(tc.Expected))
				for i, r := range tc.Expected {
					want[i] = normalizeJSON(t, r)
				}
				if tc.Unordered {
					got, want = sortedCopy(got), sortedCopy(want)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("\nquery: %s\n got: [%s]\nwant: [%s]", tc.Query, strings.Join(got, ","), strings.Join(want, ","))
				}
			})
		}
	}
	t.Logf("%d corpus cases", total)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
