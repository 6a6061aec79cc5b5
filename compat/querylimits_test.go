package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
)

// crossDoc is an item whose arr holds the numbers 0..n-1: a JOIN over it
// fans out n ways, so three JOINs make n³ rows.
func crossDoc(id string, n int) []byte {
	nums := make([]string, n)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	return []byte(`{"id":"` + id + `","pk":"p","arr":[` + strings.Join(nums, ",") + `]}`)
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAbandonedQueryFreesTheCPU starts a query over a billion-row cross
// product (with no time budget, so only the cancellation can stop it), and
// one calling a user-defined function that never returns, gives up on each
// after a second as a client would, and then measures the CPU time the
// whole process uses over two-second windows: a query still running would
// use about one core's worth of each; a stopped one leaves next to
// nothing. Measuring CPU time rather than wall time, against the window's
// measured length, keeps the test true on a loaded machine.
func TestAbandonedQueryFreesTheCPU(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{QueryTimeBudget: -1, ScriptLimits: script.Limits{Timeout: time.Minute}}})
	c := newContainer(t, s, "db", "cross", "/pk")
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.CreateItem(context.Background(), pk, crossDoc("x", 1000), nil); err != nil {
		t.Fatal(err)
	}
	createScript(t, s, "db", "cross", "udfs", "spin", map[string]string{"body": `function (x) { while (true) {} }`})
	for _, q := range []string{
		"SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr",
		"SELECT VALUE udf.spin(c.id) FROM c",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		before := cpuTime(t)
		pager := c.NewQueryItemsPager(q, pk, nil)
		if _, err := pager.NextPage(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s answered within its client's patience: %v", q, err)
		}
		cancel()
		running := cpuTime(t) - before
		// A query still running uses a core's worth of the window's wall
		// time whenever it is scheduled; a stopped one leaves next to
		// nothing. Other work of the process (a collection, a previous
		// test's server winding down) can fill one window, so up to three
		// are tried: a query still running fills every one.
		var windows []string
		stopped := false
		for range 3 {
			start, wall := cpuTime(t), time.Now()
			time.Sleep(2 * time.Second) // the measurement window
			used, elapsed := cpuTime(t)-start, time.Since(wall)
			windows = append(windows, fmt.Sprintf("%v of CPU in %v", used.Round(time.Millisecond), elapsed.Round(time.Millisecond)))
			if used < elapsed/4 {
				stopped = true
				break
			}
		}
		t.Logf("%s: CPU %v during the query's first second; after the client gave up: %s", q, running, strings.Join(windows, ", "))
		if !stopped {
			t.Errorf("%s: the process used over a quarter of a core in each window after the client gave up (%s): the query still runs", q, strings.Join(windows, ", "))
		}
	}
	// The server still answers.
	if _, err := c.ReadItem(context.Background(), pk, "x", nil); err != nil {
		t.Fatal(err)
	}
}

// TestQueryPagesEndAtTheirTimeBudget gives pages a 20 ms budget and runs a
// streaming query that evaluates three million JOIN rows (a tenth of a
// second at the very least) to return 900: pages end early, with a
// continuation naming the row to resume at, and
// following the continuations yields every result once, in order. A query
// evaluated whole that cannot finish within one page's budget is answered
// 408, while a small one is served.
func TestQueryPagesEndAtTheirTimeBudget(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{QueryTimeBudget: 20 * time.Millisecond}})
	c := newContainer(t, s, "db", "budget", "/pk")
	pk := azcosmos.NewPartitionKeyString("p")
	const docs, n, kept = 3, 1000, 300
	var want []string
	for d := range docs {
		id := fmt.Sprint("d", d)
		if _, err := c.CreateItem(context.Background(), pk, crossDoc(id, n), nil); err != nil {
			t.Fatal(err)
		}
		for a := range kept {
			want = append(want, fmt.Sprintf(`{"id":"%s","a":%d}`, id, a))
		}
	}
	q := "SELECT c.id, a FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE a = b AND a < 300"
	got, pages, err := queryAll(t, c, q, pk, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d results in %d pages", len(got), pages)
	if pages < 2 {
		t.Errorf("%d results came in %d page of up to 1000: the page did not end at its budget", len(got), pages)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range got {
		if string(got[i]) != want[i] {
			t.Fatalf("result %d = %s, want %s", i, got[i], want[i])
		}
	}

	_, _, err = queryAll(t, c, "SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr", pk, 100)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusRequestTimeout || !strings.Contains(err.Error(), `"code": "RequestTimeout"`) {
		t.Errorf("a whole evaluation past its budget: %v, want 408 RequestTimeout", err)
	}
	res, _, err := queryAll(t, c, "SELECT VALUE COUNT(1) FROM c", pk, 100)
	if err != nil || len(res) != 1 || string(res[0]) != fmt.Sprint(docs) {
		t.Errorf("a small aggregate: %s, %v", res, err)
	}
}

// heapObjects is the bytes of heap objects, live or not yet collected:
// what the process holds.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakHeap samples heapObjects until stop is closed and returns the peak.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		peak := heapObjects()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				out <- max(peak, heapObjects())
				return
			case <-tick.C:
				peak = max(peak, heapObjects())
			}
		}
	}()
	return out
}

// TestQueryMemoryStaysBounded runs `ORDER BY` over a million-row cross
// product (a gigabyte and more of heap before queries were bounded) with a
// 32 MB limit per query: the query is refused with the memory error, the
// heap never grows past the bound plus the collector's slack, and after it
// the heap is back near where it started. Three such queries at once,
// under a 48 MB pool shared by all queries, are each refused (400 at the
// query's limit or 429 when the pool is taken) and hold no more together.
//
// It runs on PostgreSQL too, with the same allowances: the store reads three
// items, and a heap profile taken at the peak (after a collection) showed
// 42 MB live, 95% of it the query's records and projections and 0.5 MB the
// driver (one connection's read buffer); what the heap holds beyond that is
// the collector's slack, as on memory storage.
func TestQueryMemoryStaysBounded(t *testing.T) {
	const limit, pool = 32 << 20, 48 << 20
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{QueryMemoryLimit: limit, QueryMemoryPool: pool}})
	c := newContainer(t, s, "db", "memory", "/pk")
	pk := azcosmos.NewPartitionKeyString("p")
	for _, id := range []string{"x", "y", "z"} {
		if _, err := c.CreateItem(context.Background(), pk, crossDoc(id, 1000), nil); err != nil {
			t.Fatal(err)
		}
	}
	q := "SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr ORDER BY a"
	run := func(concurrent int) (growth uint64, statuses []int) {
		runtime.GC()
		base := heapObjects()
		stop := make(chan struct{})
		peak := peakHeap(stop)
		statuses = make([]int, concurrent)
		var wg sync.WaitGroup
		for i := range concurrent {
			wg.Go(func() {
				pager := c.NewQueryItemsPager(q, pk, nil)
				_, err := pager.NextPage(context.Background())
				var re *azcore.ResponseError
				switch {
				case err == nil:
					statuses[i] = 200
				case errors.As(err, &re):
					statuses[i] = re.StatusCode
					if re.StatusCode == 400 && !strings.Contains(err.Error(), "Query exceeded the maximum allowed memory usage of 32 MB") {
						t.Errorf("400 without the memory error: %v", err)
					}
				default:
					t.Errorf("query: %v", err)
				}
			})
		}
		wg.Wait()
		close(stop)
		p := <-peak
		runtime.GC()
		if end := heapObjects(); end > base+16<<20 {
			t.Errorf("heap %d MB after the queries, %d MB before", end>>20, base>>20)
		}
		return p - min(p, base), statuses
	}

	growth, statuses := run(1)
	t.Logf("one query: heap grew by %d MB at most; status %v", growth>>20, statuses)
	if statuses[0] != 400 {
		t.Errorf("status %d, want 400 (refused at the limit)", statuses[0])
	}
	// The collector lets garbage reach the size of what is live before it
	// runs (GOGC=100), and the bound is an estimate: three times the bound
	// is the allowance. Unbounded, this query grew the heap by over 1 GB.
	if growth > 3*limit {
		t.Errorf("heap grew by %d MB for a query bounded at %d MB", growth>>20, limit>>20)
	}

	growth, statuses = run(3)
	t.Logf("three queries: heap grew by %d MB at most; statuses %v", growth>>20, statuses)
	for _, st := range statuses {
		if st != 400 && st != 429 {
			t.Errorf("status %d, want 400 or 429", st)
		}
	}
	// Three queries' garbage is collected by a collector that, on a
	// machine whose cores other processes hold, runs late: a fourth pool
	// of slack (one run beside a CPU hog reached 155 MB); unbounded, the
	// three grew the heap by gigabytes.
	if growth > 4*pool {
		t.Errorf("heap grew by %d MB for queries sharing %d MB", growth>>20, pool>>20)
	}

	// Within the bound, the same query streams its complete, ordered result.
	var small []string
	for a := range 20 {
		for b := range 20 {
			small = append(small, fmt.Sprintf(`{"a":%d,"b":%d}`, a, b))
		}
	}
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("s"),
		[]byte(strings.Replace(string(crossDoc("s", 20)), `"pk":"p"`, `"pk":"s"`, 1)), nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := queryAll(t, c, q, azcosmos.NewPartitionKeyString("s"), 1000)
	if err != nil {
		t.Fatal(err)
	}
	gotS := make([]string, len(got))
	for i, r := range got {
		var v struct{ A, B int }
		json.Unmarshal(r, &v)
		gotS[i] = fmt.Sprintf(`{"a":%d,"b":%d}`, v.A, v.B)
	}
	if fmt.Sprint(gotS) != fmt.Sprint(small) {
		t.Errorf("ORDER BY within the bound: %v", gotS)
	}
}
