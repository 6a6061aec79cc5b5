package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// scriptRequest sends a signed request, as the JavaScript SDK does (the Go
// SDK has no script API, and retries a 408 on its own): path is the resource
// path without the leading slash, rtype and link the resource type and link
// it is signed for.
func scriptRequest(t testing.TB, s *orrerytest.Server, method, path, rtype, link string, body []byte, headers map[string]string) (int, []byte) {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, method, rtype, link, date)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// createScript registers a script of kind (sprocs, triggers or udfs) on
// db/coll; def is its definition without the id.
func createScript(t testing.TB, s *orrerytest.Server, db, coll, kind, id string, def map[string]string) {
	t.Helper()
	parent := "dbs/" + db + "/colls/" + coll
	props := map[string]string{"id": id}
	for k, v := range def {
		props[k] = v
	}
	status, out := scriptRequest(t, s, "POST", parent+"/"+kind, kind, parent, mustJSON(t, props), nil)
	if status != http.StatusCreated {
		t.Fatalf("creating %s %s: %d %s", kind, id, status, out)
	}
}

// createSproc registers a stored procedure on db/coll.
func createSproc(t testing.TB, s *orrerytest.Server, db, coll, id, body string) {
	t.Helper()
	createScript(t, s, db, coll, "sprocs", id, map[string]string{"body": body})
}

// executeSproc runs a stored procedure in the logical partition pk.
func executeSproc(t *testing.T, s *orrerytest.Server, db, coll, id, pk string, args ...any) (int, []byte) {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll + "/sprocs/" + id
	if args == nil {
		args = []any{}
	}
	return scriptRequest(t, s, "POST", link, "sprocs", link, mustJSON(t, args), map[string]string{
		"x-ms-documentdb-partitionkey": string(mustJSON(t, []string{pk})),
	})
}

// pointReadLatencies reads item id of partition pk, one read a millisecond
// after the last, until stop is closed and returns how long each read took;
// a failed read fails t.
func pointReadLatencies(t *testing.T, c *azcosmos.ContainerClient, pk, id string, stop <-chan struct{}) []time.Duration {
	var out []time.Duration
	key := azcosmos.NewPartitionKeyString(pk)
	for {
		select {
		case <-stop:
			return out
		default:
		}
		start := time.Now()
		if _, err := c.ReadItem(context.Background(), key, id, nil); err != nil {
			t.Errorf("point read of %s/%s while a script misbehaves: %v", pk, id, err)
			return out
		}
		out = append(out, time.Since(start))
		time.Sleep(time.Millisecond)
	}
}

// idsInPartition returns the ids of the items of partition pk.
func idsInPartition(t *testing.T, c *azcosmos.ContainerClient, pk string) []string {
	t.Helper()
	pager := c.NewQueryItemsPager("SELECT VALUE c.id FROM c", azcosmos.NewPartitionKeyString(pk), nil)
	var ids []string
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			var id string
			if err := json.Unmarshal(raw, &id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// heapAfterCollection collects garbage until the heap is at most limit
// bytes, for up to a second (the server may still be answering the request
// that held the memory), and returns the heap's size.
func heapAfterCollection(limit uint64) uint64 {
	var ms runtime.MemStats
	for try := 0; try < 20; try++ {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc <= limit {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ms.HeapAlloc
}

// rusageCPU is the CPU time the test process (clients and the in-process
// server) has used so far. A script stopped at its budget cannot have used
// more CPU than the budget, however slow the machine: unlike wall time,
// this does not grow when other processes take the cores.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// warmUntilAnswered makes a warm-up request until it is not answered 408,
// for a minute at most. A warm-up only leaves an idle runtime for the
// timed request after it; on a loaded machine the previous case's stopped
// script can still hold its slot while its interrupt waits for a core, and
// a warm-up's budget counts its wait for that slot (seen at load average
// 17: "warm-up: 408 The request was cancelled before it completed").
func warmUntilAnswered(request func() (int, []byte)) (int, []byte) {
	deadline := time.Now().Add(time.Minute)
	for {
		status, body := request()
		if status != http.StatusRequestTimeout || time.Now().After(deadline) {
			return status, body
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Bounds of a script stopped at its budget. The CPU-time bound holds on any
// machine and is what holds the stop to the budget: the script's own run
// (at most the budget), what the request around it costs, and the point
// reads that run meanwhile. The wall-time bound only tells a script stopped
// from one never stopped: on a loaded machine the interrupt and the answer
// wait for a core (at load average 33, a 500 ms budget's loop was answered
// after 4.4 s, having used 100 ms of CPU).
func wallLimit(budget time.Duration) time.Duration { return budget + 20*time.Second }
func cpuLimit(budget time.Duration) time.Duration  { return 2*budget + 200*time.Millisecond }

// TestHostileScripts runs stored procedures that never end or try to
// allocate a gigabyte, each after a write of its own: the script fails, not
// the server; its write is rolled back; the answer is a Cosmos error; and a
// point read of another partition keeps being served meanwhile.
func TestHostileScripts(t *testing.T) {
	// The endless loops run against a short budget. The other scripts must
	// be stopped by what they attack (memory, the stack), not by time: they
	// run on a server whose budget they cannot reach even on a loaded
	// machine, so a 408 from them is a failure.
	const budget = 500 * time.Millisecond
	const longBudget = time.Minute
	type served struct {
		s *orrerytest.Server
		c *azcosmos.ContainerClient
	}
	start := func(budget time.Duration) served {
		s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ScriptLimits: script.Limits{Timeout: budget}}})
		c := newContainer(t, s, "db", "items", "/pk")
		if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("b"), mustJSON(t, map[string]string{"id": "r", "pk": "b"}), nil); err != nil {
			t.Fatal(err)
		}
		createSproc(t, s, "db", "items", "healthy", `function healthy() { getContext().getResponse().setBody("fine"); }`)
		return served{s, c}
	}
	short, long := start(budget), start(longBudget)
	// Every procedure writes first, then misbehaves in the write's callback,
	// when the write has been done.
	wrap := func(misbehave string) string {
		return `function hostile(id) {
			var coll = getContext().getCollection();
			coll.createDocument(coll.getSelfLink(), {id: id, pk: "a"}, function (err) {
				if (err) throw err;
				` + misbehave + `
			});
		}`
	}
	tests := []struct {
		name      string
		misbehave string
		// statuses are the answers allowed; the error code follows the status.
		statuses []int
		// message matches the error message.
		message string
		// timed: an endless loop, run against the short budget and stopped
		// by it (see wallLimit and cpuLimit).
		timed bool
	}{
		{"endless loop", `while (true) {}`, []int{408}, "time budget", true},
		{"endless loop that catches", `for (;;) { try { while (true) {} } catch (e) {} }`, []int{408}, "time budget", true},
		{"endless recursion", `function f() { try { f(); } catch (e) { f(); } } for (;;) { try { f(); } catch (e) {} }`, []int{400}, "RangeError: Maximum call stack size exceeded", false},
		{"1 GB string at once", `var s = "x".repeat(1 << 30); getContext().getResponse().setBody(s.length);`, []int{400}, "Invalid string length", false},
		{"1 GB array at once", `var a = new Array(1 << 27).fill(0); getContext().getResponse().setBody(a.length);`, []int{400}, "Invalid array length", false},
		// Each concatenation is one copy the interrupt cannot reach, so it is
		// refused before it is made once its result would hold about the
		// whole memory limit.
		{"1 GB by doubling a string", `var s = "0123456789abcdef"; for (var i = 0; i < 26; i++) { s = s + s; } getContext().getResponse().setBody(s.length);`, []int{400}, "memory limit", false},
		{"1 GB in 1 MB strings", `var s = "x".repeat(1 << 20), a = []; for (var i = 0; i < 1024; i++) { a.push(s + i); }`, []int{400}, "memory limit", false},
		{"1 GB of small objects", `var a = []; for (var i = 0; i < (1 << 24); i++) { a.push({i: i, s: "item " + i}); }`, []int{400}, "memory limit", false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := long
			if tc.timed {
				srv = short
			}
			s, c := srv.s, srv.c
			id := "hostile" + string(rune('a'+i))
			createSproc(t, s, "db", "items", id, wrap(tc.misbehave))

			// A server makes a runtime before the budget starts when none is
			// idle (at its first run, after one was retired): the healthy
			// run leaves one idle, so the timings below are the steady state.
			if status, body := warmUntilAnswered(func() (int, []byte) {
				return executeSproc(t, s, "db", "items", "healthy", "a")
			}); status != http.StatusOK {
				t.Fatalf("warm-up: %d %s", status, body)
			}
			stop := make(chan struct{})
			var latencies []time.Duration
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				latencies = pointReadLatencies(t, c, "b", "r", stop)
			}()
			start, cpuStart := time.Now(), rusageCPU(t)
			status, body := executeSproc(t, s, "db", "items", id, "a", "written-by-"+id)
			elapsed, cpu := time.Since(start), rusageCPU(t)-cpuStart
			close(stop)
			wg.Wait()

			var cosmosErr struct{ Code, Message string }
			if err := json.Unmarshal(body, &cosmosErr); err != nil {
				t.Fatalf("the answer is not a Cosmos error body: %d %q", status, body)
			}
			wantCode := map[int]string{400: "BadRequest", 408: "RequestTimeout"}[status]
			if !slices.Contains(tc.statuses, status) || cosmosErr.Code != wantCode || !regexp.MustCompile(tc.message).MatchString(cosmosErr.Message) {
				t.Fatalf("got %d %s %q, want one of %v with a message matching %q", status, cosmosErr.Code, cosmosErr.Message, tc.statuses, tc.message)
			}
			if tc.timed && (elapsed > wallLimit(budget) || cpu > cpuLimit(budget)) {
				t.Errorf("the script was stopped after %v having used %v of CPU, more than %v or %v for its budget %v",
					elapsed, cpu, wallLimit(budget), cpuLimit(budget), budget)
			}
			if ids := idsInPartition(t, c, "a"); len(ids) != 0 {
				t.Errorf("the failed script left items behind: %v", ids)
			}
			// A script that fails at once (not timed) may end before a
			// reader's first read does on a loaded machine: reads are
			// checked against the looping ones only.
			if tc.timed && len(latencies) == 0 {
				t.Fatalf("no point read of another partition completed in the %v the script ran", elapsed)
			}
			if len(latencies) > 0 {
				slices.Sort(latencies)
				t.Logf("stopped after %v (%v of CPU); meanwhile %d point reads of another partition, median %v, worst %v",
					elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond), len(latencies), latencies[len(latencies)/2].Round(10*time.Microsecond), latencies[len(latencies)-1].Round(10*time.Microsecond))
			}
			// A looping script holds one core; the other partition must still
			// be served while it runs, not once it ends. How many reads fit
			// depends on how much CPU the machine leaves the test (beside a
			// CPU hog, a few), so what is checked is that reads completed
			// while the script ran: the reader's last read may end after it
			// and its first may have begun before, so at least two more. A
			// server that made reads wait for the script serves one.
			if tc.timed && len(latencies) < 3 {
				t.Errorf("only %d point reads of another partition completed while the script looped for %v", len(latencies), elapsed)
			}
			if heap := heapAfterCollection(256 << 20); heap > 256<<20 {
				t.Errorf("the heap still holds %d MiB after the script failed", heap>>20)
			}
			if status, body := executeSproc(t, s, "db", "items", "healthy", "a"); status != http.StatusOK || string(body) != `"fine"` {
				t.Fatalf("the partition is not served after the hostile script: %d %s", status, body)
			}
		})
	}
}

// TestHostileTriggersAndUDFs runs endless loops in a pre-trigger, a
// post-trigger and a UDF: each request ends with 408 once its budget is
// spent (see wallLimit and cpuLimit), and the write a trigger was named on is not left behind.
func TestHostileTriggersAndUDFs(t *testing.T) {
	const budget = 300 * time.Millisecond
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ScriptLimits: script.Limits{Timeout: budget}}})
	c := newContainer(t, s, "db", "items", "/pk")
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("b"), mustJSON(t, map[string]string{"id": "r", "pk": "b"}), nil); err != nil {
		t.Fatal(err)
	}
	createScript(t, s, "db", "items", "triggers", "spinBefore", map[string]string{"body": `function () { while (true) {} }`, "triggerType": "Pre", "triggerOperation": "All"})
	createScript(t, s, "db", "items", "triggers", "spinAfter", map[string]string{"body": `function () { while (true) {} }`, "triggerType": "Post", "triggerOperation": "All"})
	createScript(t, s, "db", "items", "triggers", "noop", map[string]string{"body": `function () {}`, "triggerType": "Pre", "triggerOperation": "All"})
	createScript(t, s, "db", "items", "udfs", "spin", map[string]string{"body": `function (x) { while (true) {} }`})
	docs := "dbs/db/colls/items"
	pkHeader := func(pk string) string { return string(mustJSON(t, []string{pk})) }
	// A runtime that was interrupted is not reused; making one takes some
	// 10 to 30 ms before the budget starts. Warm up before every case so
	// that what is timed is the budget and how fast it stops the script.
	warmUp := func(t *testing.T) {
		if status, body := warmUntilAnswered(func() (int, []byte) {
			return scriptRequest(t, s, "POST", docs+"/docs", "docs", docs, []byte(`{"id":"warm","pk":"b"}`),
				map[string]string{"x-ms-documentdb-partitionkey": pkHeader("b"), "x-ms-documentdb-pre-trigger-include": "noop",
					"x-ms-documentdb-is-upsert": "true"})
		}); status >= 300 {
			t.Fatalf("warm-up: %d %s", status, body)
		}
	}
	tests := []struct {
		name    string
		rtype   string
		body    string
		headers map[string]string
	}{
		{"pre-trigger", "docs", `{"id":"t1","pk":"a"}`, map[string]string{"x-ms-documentdb-pre-trigger-include": "spinBefore"}},
		{"post-trigger", "docs", `{"id":"t2","pk":"a"}`, map[string]string{"x-ms-documentdb-post-trigger-include": "spinAfter"}},
		{"udf in a query", "docs", `{"query":"SELECT udf.spin(c.id) FROM c"}`, map[string]string{
			"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{"x-ms-documentdb-partitionkey": pkHeader("a")}
			if strings.Contains(tc.body, "query") {
				headers["x-ms-documentdb-partitionkey"] = pkHeader("b")
			}
			for k, v := range tc.headers {
				headers[k] = v
			}
			warmUp(t)
			start, cpuStart := time.Now(), rusageCPU(t)
			status, body := scriptRequest(t, s, "POST", docs+"/docs", tc.rtype, docs, []byte(tc.body), headers)
			elapsed, cpu := time.Since(start), rusageCPU(t)-cpuStart
			var cosmosErr struct{ Code, Message string }
			if err := json.Unmarshal(body, &cosmosErr); err != nil || status != http.StatusRequestTimeout || cosmosErr.Code != "RequestTimeout" {
				t.Fatalf("got %d %s, want 408 with a RequestTimeout error body", status, body)
			}
			if elapsed > wallLimit(budget) || cpu > cpuLimit(budget) {
				t.Errorf("the script was stopped after %v having used %v of CPU, more than %v or %v for its budget %v",
					elapsed, cpu, wallLimit(budget), cpuLimit(budget), budget)
			}
			t.Logf("stopped after %v (%v of CPU): %s", elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond), cosmosErr.Message)
			if ids := idsInPartition(t, c, "a"); len(ids) != 0 {
				t.Errorf("the write survived its trigger's timeout: %v", ids)
			}
		})
	}
}

// TestConcurrentRunawayScripts runs endless loops in four partitions at once,
// twice as many as the test machine's cores. Scripts are admitted to half the
// cores: the ones admitted end with 408, the ones that find no slot within
// their budget with 429; none leaves a write behind, and another partition
// keeps being served. The loops are timed against twice the budget (each may
// first wait for a slot), with wallLimit's room for a loaded machine, and
// the CPU they use against cpuLimit's each.
func TestConcurrentRunawayScripts(t *testing.T) {
	const budget = 500 * time.Millisecond
	const loops = 4
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ScriptLimits: script.Limits{Timeout: budget}}})
	c := newContainer(t, s, "db", "items", "/pk")
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("b"), mustJSON(t, map[string]string{"id": "r", "pk": "b"}), nil); err != nil {
		t.Fatal(err)
	}
	createSproc(t, s, "db", "items", "spin", `function spin(pk) {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "left-behind", pk: pk}, function (err) {
			if (err) throw err;
			while (true) {}
		});
	}`)
	stop := make(chan struct{})
	var latencies []time.Duration
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		latencies = pointReadLatencies(t, c, "b", "r", stop)
	}()
	elapsed := make([]time.Duration, loops)
	cpuStart := rusageCPU(t)
	var wg sync.WaitGroup
	for i := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := "loop" + strconv.Itoa(i)
			start := time.Now()
			status, body := executeSproc(t, s, "db", "items", "spin", pk, pk)
			elapsed[i] = time.Since(start)
			if status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
				t.Errorf("loop in %s: %d %s, want 408 (ran out of time) or 429 (found no slot)", pk, status, body)
			}
		}()
	}
	wg.Wait()
	cpu := rusageCPU(t) - cpuStart
	close(stop)
	reader.Wait()
	for i := range loops {
		if ids := idsInPartition(t, c, "loop"+strconv.Itoa(i)); len(ids) != 0 {
			t.Errorf("a stopped loop left items behind: %v", ids)
		}
	}
	slices.Sort(elapsed)
	// A loop may wait up to the budget for a slot, then run for the budget:
	// twice the budget, with wallLimit's room for a loaded machine. What
	// holds each loop's stop to its budget is the CPU they all used, which
	// load does not move: each at most cpuLimit's, had all been admitted.
	if elapsed[loops-1] > wallLimit(2*budget) || cpu > loops*cpuLimit(budget) {
		t.Errorf("the last of %d loops ended after %v, having used %v of CPU together; more than %v or %v for twice the budget %v",
			loops, elapsed[loops-1], cpu, wallLimit(2*budget), loops*cpuLimit(budget), budget)
	}
	if len(latencies) == 0 {
		t.Fatal("no point read of another partition completed while the loops ran")
	}
	slices.Sort(latencies)
	t.Logf("%d loops at once ended after %v to %v (%v of CPU); meanwhile %d point reads of another partition, median %v, worst %v",
		loops, elapsed[0].Round(time.Millisecond), elapsed[loops-1].Round(time.Millisecond), cpu.Round(time.Millisecond), len(latencies),
		latencies[len(latencies)/2].Round(10*time.Microsecond), latencies[len(latencies)-1].Round(10*time.Microsecond))
	// As in TestHostileScripts: how many reads fit, and how fast, depends on
	// the CPU the machine leaves the test (a median of 217 ms beside CI's
	// load), so what is checked is that reads completed while the loops
	// ran. The reader's first read may begin before them and its last end
	// after, so at least two more; a server that made reads wait for the
	// scripts serves one.
	if len(latencies) < 3 {
		t.Errorf("only %d point reads of another partition completed while %d loops ran for up to %v", len(latencies), loops, elapsed[loops-1])
	}
}
