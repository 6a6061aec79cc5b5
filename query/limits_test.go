package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// arrayDoc is a document whose arr holds the numbers 0..n-1.
func arrayDoc(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return `{"id":"x","arr":[` + strings.Join(parts, ",") + `],"tags":[{"t":"a"},{"t":"b"},{"t":"c"}]}`
}

func prepare(t *testing.T, text string, opts Options) *Execution {
	t.Helper()
	q, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	x, err := q.Prepare(opts)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRowsFromResumesAnywhere stops a document's rows after every possible
// number of them and resumes at the returned position: the pieces put
// together are exactly the rows of one uninterrupted run, JOINs over arrays
// and over subqueries alike.
func TestRowsFromResumesAnywhere(t *testing.T) {
	doc := []byte(arrayDoc(6))
	for _, text := range []string{
		"SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE (a + b) % 3 = 0",
		"SELECT VALUE [a, s] FROM c JOIN a IN c.arr JOIN s IN (SELECT VALUE t.t FROM t IN c.tags WHERE t.t != 'b')",
		"SELECT c.id FROM c",
	} {
		x := prepare(t, text, Options{})
		want, err := x.Rows(doc)
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= len(want); k++ {
			var got []string
			var from []int
			for {
				n := 0
				next, err := x.RowsFrom(doc, from, func(r json.RawMessage) bool {
					if n == k {
						return false
					}
					n++
					got = append(got, string(r))
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				if next == nil {
					break
				}
				from = next
			}
			if fmt.Sprint(got) != fmt.Sprint(asStrings(want)) {
				t.Fatalf("%s, pages of %d: got %v, want %v", text, k, got, asStrings(want))
			}
		}
	}
}

func asStrings[T ~[]byte](rs []T) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// TestRowsFromStopsWhenTheBudgetIsSpent runs with a budget already spent:
// every call still gets past one row, stops at the next with its position,
// and the calls together give every row once.
func TestRowsFromStopsWhenTheBudgetIsSpent(t *testing.T) {
	doc := []byte(arrayDoc(5))
	text := "SELECT VALUE [a, b] FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE a <= b"
	want, err := prepare(t, text, Options{}).Rows(doc)
	if err != nil {
		t.Fatal(err)
	}
	x := prepare(t, text, Options{Deadline: time.Now().Add(-time.Second)})
	var got []string
	var from []int
	calls := 0
	for {
		calls++
		if calls > 100 {
			t.Fatal("no progress")
		}
		next, err := x.RowsFrom(doc, from, func(r json.RawMessage) bool { got = append(got, string(r)); return true })
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		from = next
	}
	if fmt.Sprint(got) != fmt.Sprint(asStrings(want)) {
		t.Fatalf("got %v, want %v", got, asStrings(want))
	}
	if calls != 25 {
		t.Errorf("%d calls for 25 rows evaluated, want one each", calls)
	}
}

// TestWholeExecutionFailsPastItsBudget: a query evaluated whole cannot stop
// between rows; past its deadline it fails with ErrTimeBudget, and so does
// a streaming row whose own subquery runs out of time.
func TestWholeExecutionFailsPastItsBudget(t *testing.T) {
	doc := arrayDoc(1000)
	x := prepare(t, "SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr",
		Options{Deadline: time.Now().Add(20 * time.Millisecond)})
	if _, err := x.Execute(docsOf(doc)); !errors.Is(err, ErrTimeBudget) {
		t.Fatalf("err = %v, want ErrTimeBudget", err)
	}
	x = prepare(t, "SELECT VALUE (SELECT VALUE COUNT(1) FROM a IN c.arr JOIN b IN c.arr JOIN d IN c.arr) FROM c",
		Options{Deadline: time.Now().Add(20 * time.Millisecond)})
	if _, err := x.RowsFrom([]byte(doc), nil, func(json.RawMessage) bool { return true }); !errors.Is(err, ErrTimeBudget) {
		t.Fatalf("err = %v, want ErrTimeBudget", err)
	}
}

// TestCancellationStopsExecution cancels a cross product of a billion rows:
// the execution returns the context's error promptly (the bound is generous,
// for loaded machines; the uncancelled query runs for minutes).
func TestCancellationStopsExecution(t *testing.T) {
	doc := arrayDoc(1000)
	ctx, cancel := context.WithCancel(context.Background())
	x := prepare(t, "SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr", Options{Context: ctx})
	done := make(chan error, 1)
	go func() {
		_, err := x.Execute(docsOf(doc))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it get going; not a synchronization
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the execution did not stop after cancellation")
	}
}

// TestMemoryLimitRefusesRunawayQueries: an ORDER BY over a cross product, a
// growing ARRAY subquery and a GROUP BY with a group per row each fail
// with the memory error past the limit, while the same queries within it
// succeed; a pool shared by executions refuses with ErrMemoryPool and is
// whole again after.
func TestMemoryLimitRefusesRunawayQueries(t *testing.T) {
	big, small := arrayDoc(1000), arrayDoc(10)
	for _, text := range []string{
		"SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr ORDER BY a",
		"SELECT VALUE ARRAY(SELECT VALUE [a, b] FROM a IN c.arr JOIN b IN c.arr) FROM c",
		"SELECT a, b, COUNT(1) AS n FROM c JOIN a IN c.arr JOIN b IN c.arr GROUP BY a, b",
		"SELECT DISTINCT VALUE [a, b] FROM c JOIN a IN c.arr JOIN b IN c.arr",
		"SELECT VALUE MAKELIST([a, b]) FROM c JOIN a IN c.arr JOIN b IN c.arr",
	} {
		x := prepare(t, text, Options{MaxMemory: 8 << 20})
		_, err := x.Execute(docsOf(big))
		var qe *Error
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, "Query exceeded the maximum allowed memory usage of 8 MB") {
			t.Errorf("%s: err = %v, want the memory limit error", text, err)
		}
		if _, err := x.Execute(docsOf(small)); err != nil {
			t.Errorf("%s within the limit: %v", text, err)
		}
	}
	pool := NewMemoryPool(4 << 20)
	x := prepare(t, "SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr ORDER BY a", Options{Pool: pool})
	if _, err := x.Execute(docsOf(big)); !errors.Is(err, ErrMemoryPool) {
		t.Errorf("err = %v, want ErrMemoryPool", err)
	}
	if n := pool.InUse(); n != 0 {
		t.Errorf("pool holds %d bytes after the execution", n)
	}
	// A streaming count holds nothing, however many rows it counts.
	x = prepare(t, "SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr", Options{MaxMemory: 1 << 20, Pool: pool})
	res, err := x.Execute(docsOf(big))
	if err != nil || string(res[0]) != "1000000" {
		t.Errorf("count = %s, %v", res, err)
	}
}
