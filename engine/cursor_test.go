package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestWholeQueryPagesComeFromOneEvaluation pages through queries evaluated
// whole: every page after the first is cut from the cursor the first page
// filled, so a write between pages does not shift the results; a token whose
// cursor is gone evaluates the query again and resumes at its offset; the
// cursor is dropped with the last page; a token is never served the cursor of
// another query.
func TestWholeQueryPagesComeFromOneEvaluation(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	for i := 0; i < 10; i++ {
		if _, err := e.CreateItem(ctx, req(fmt.Sprint(i), "a", fmt.Sprintf(`{"id":"%d","pk":"a","n":%d}`, i, i))); err != nil {
			t.Fatal(err)
		}
	}
	page := func(q, cont string) ([]string, string) {
		t.Helper()
		res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: q, MaxItems: 3, Continuation: cont,
			PartitionKey: StringKey("a"), HasPartitionKey: true})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out := make([]string, len(res.Items))
		for i, it := range res.Items {
			out[i] = string(it)
		}
		return out, res.Continuation
	}
	const ordered = "SELECT VALUE c.n FROM c ORDER BY c.n DESC"
	cases := []struct {
		name string
		run  func(t *testing.T) string
		want string
	}{
		{"a write between pages does not shift them", func(t *testing.T) string {
			first, cont := page(ordered, "")
			if _, err := e.CreateItem(ctx, req("new", "a", `{"id":"new","pk":"a","n":100}`)); err != nil {
				t.Fatal(err)
			}
			defer e.DeleteItem(ctx, req("new", "a", ""))
			all := first
			for cont != "" {
				var p []string
				p, cont = page(ordered, cont)
				all = append(all, p...)
			}
			return strings.Join(all, ",")
		}, "9,8,7,6,5,4,3,2,1,0"},
		{"a token without its cursor resumes at its offset", func(t *testing.T) string {
			_, cont := page(ordered, "")
			raw, _ := base64.RawURLEncoding.DecodeString(cont)
			offset, _, _ := strings.Cut(string(raw), ".")
			p, _ := page(ordered, base64.RawURLEncoding.EncodeToString([]byte(offset+".0000")))
			return strings.Join(p, ",")
		}, "6,5,4"},
		{"another query's token is not served its cursor", func(t *testing.T) string {
			_, cont := page(ordered, "")
			p, _ := page("SELECT VALUE c.n FROM c ORDER BY c.n ASC", cont)
			return strings.Join(p, ",")
		}, "3,4,5"},
		{"the last page drops the cursor", func(t *testing.T) string {
			e.queries.cursors = newCursorCache(e.now)
			_, cont := page(ordered, "")
			kept := e.queries.cursors.len()
			for cont != "" {
				_, cont = page(ordered, cont)
			}
			return fmt.Sprintf("%d then %d", kept, e.queries.cursors.len())
		}, "1 then 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(t); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCursorCacheEvictsLeastRecentlyUsed(t *testing.T) {
	cc := newCursorCache(newMemEngine(t).now)
	cc.maxLen = 2
	a := cc.put("a", nil)
	b := cc.put("b", nil)
	if _, ok := cc.get(a, "a"); !ok {
		t.Fatal("a is gone")
	}
	c := cc.put("c", nil)
	for _, tc := range []struct {
		id, fp string
		kept   bool
	}{{a, "a", true}, {b, "b", false}, {c, "c", true}, {a, "b", false}} {
		if _, ok := cc.get(tc.id, tc.fp); ok != tc.kept {
			t.Errorf("cursor %s: kept %v, want %v", tc.fp, ok, tc.kept)
		}
	}
}
