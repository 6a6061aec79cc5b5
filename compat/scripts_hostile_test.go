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
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// scriptRequest sends a signed request to a script resource, as the
// JavaScript SDK does (the Go SDK has no script API): path is the resource
// path without the leading slash, link the resource link it is signed for.
func scriptRequest(t *testing.T, s *orrerytest.Server, method, path, link string, body []byte, headers map[string]string) (int, []byte) {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, method, "sprocs", link, date)
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

// createSproc registers a stored procedure on db/coll.
func createSproc(t *testing.T, s *orrerytest.Server, db, coll, id, body string) {
	t.Helper()
	parent := "dbs/" + db + "/colls/" + coll
	status, out := scriptRequest(t, s, "POST", parent+"/sprocs", parent, mustJSON(t, map[string]string{"id": id, "body": body}), nil)
	if status != http.StatusCreated {
		t.Fatalf("creating stored procedure %s: %d %s", id, status, out)
	}
}

// executeSproc runs a stored procedure in the logical partition pk.
func executeSproc(t *testing.T, s *orrerytest.Server, db, coll, id, pk string, args ...any) (int, []byte) {
	t.Helper()
	link := "dbs/" + db + "/colls/" + coll + "/sprocs/" + id
	if args == nil {
		args = []any{}
	}
	return scriptRequest(t, s, "POST", link, link, mustJSON(t, args), map[string]string{
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

// TestHostileScripts runs stored procedures that never end or try to
// allocate a gigabyte, each after a write of its own: the script fails, not
// the server; its write is rolled back; the answer is a Cosmos error; and a
// point read of another partition keeps being served meanwhile.
func TestHostileScripts(t *testing.T) {
	const budget = 500 * time.Millisecond
	s := orrerytest.StartWith(t, orrerytest.Options{ScriptTimeout: budget})
	c := newContainer(t, s, "db", "items", "/pk")
	if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("b"), mustJSON(t, map[string]string{"id": "r", "pk": "b"}), nil); err != nil {
		t.Fatal(err)
	}
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
	createSproc(t, s, "db", "items", "healthy", `function healthy() { getContext().getResponse().setBody("fine"); }`)
	// The first run of a server makes its first JavaScript runtime before
	// the budget starts; warm up so the timings below are the steady state.
	if status, body := executeSproc(t, s, "db", "items", "healthy", "a"); status != http.StatusOK {
		t.Fatalf("warm-up: %d %s", status, body)
	}
	tests := []struct {
		name      string
		misbehave string
		// statuses are the answers allowed; the error code follows the status.
		statuses []int
		// message matches the error message.
		message string
		// timed: the run must end within the budget plus 10 %.
		timed bool
	}{
		{"endless loop", `while (true) {}`, []int{408}, "time budget", true},
		{"endless loop that catches", `for (;;) { try { while (true) {} } catch (e) {} }`, []int{408}, "time budget", true},
		{"endless recursion", `function f() { try { f(); } catch (e) { f(); } } for (;;) { try { f(); } catch (e) {} }`, []int{400}, "RangeError: Maximum call stack size exceeded", false},
		{"1 GB string at once", `var s = "x".repeat(1 << 30); getContext().getResponse().setBody(s.length);`, []int{400}, "Invalid string length", false},
		{"1 GB array at once", `var a = new Array(1 << 27).fill(0); getContext().getResponse().setBody(a.length);`, []int{400}, "Invalid array length", false},
		// One concatenation is one native call the interrupt cannot reach:
		// the last doublings may outlast the budget or slip past a memory
		// check, but never reach the full gigabyte.
		{"1 GB by doubling a string", `var s = "0123456789abcdef"; for (var i = 0; i < 26; i++) { s = s + s; } getContext().getResponse().setBody(s.length);`, []int{400, 408}, "memory limit|time budget", false},
		{"1 GB in 1 MB strings", `var s = "x".repeat(1 << 20), a = []; for (var i = 0; i < 1024; i++) { a.push(s + i); }`, []int{400}, "memory limit", false},
		// Small objects pile up slower than the budget runs out: whichever
		// limit comes first stops the script.
		{"1 GB of small objects", `var a = []; for (var i = 0; i < (1 << 24); i++) { a.push({i: i, s: "item " + i}); }`, []int{400, 408}, "memory limit|time budget", false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "hostile" + string(rune('a'+i))
			createSproc(t, s, "db", "items", id, wrap(tc.misbehave))

			stop := make(chan struct{})
			var latencies []time.Duration
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				latencies = pointReadLatencies(t, c, "b", "r", stop)
			}()
			start := time.Now()
			status, body := executeSproc(t, s, "db", "items", id, "a", "written-by-"+id)
			elapsed := time.Since(start)
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
			if limit := budget + budget/10; tc.timed && elapsed > limit {
				t.Errorf("the script was stopped after %v, more than its budget %v plus 10 %%", elapsed, budget)
			}
			if ids := idsInPartition(t, c, "a"); len(ids) != 0 {
				t.Errorf("the failed script left items behind: %v", ids)
			}
			if len(latencies) == 0 {
				t.Fatalf("no point read of another partition completed in the %v the script ran", elapsed)
			}
			slices.Sort(latencies)
			worst := latencies[len(latencies)-1]
			t.Logf("stopped after %v; meanwhile %d point reads of another partition, median %v, worst %v",
				elapsed.Round(time.Millisecond), len(latencies), latencies[len(latencies)/2].Round(10*time.Microsecond), worst.Round(10*time.Microsecond))
			// A looping script holds one core; the other partition must still
			// be served all along. Single reads may wait for a garbage
			// collection, whose stop-the-world has to preempt the loop, so
			// the median and the count are checked, the worst only logged.
			if median := latencies[len(latencies)/2]; tc.timed && (median > 10*time.Millisecond || len(latencies) < int(budget/(20*time.Millisecond))) {
				t.Errorf("only %d point reads of another partition (median %v) while the script looped for %v", len(latencies), median, elapsed)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > 256<<20 {
				t.Errorf("the heap still holds %d MiB after the script failed", ms.HeapAlloc>>20)
			}
			if status, body := executeSproc(t, s, "db", "items", "healthy", "a"); status != http.StatusOK || string(body) != `"fine"` {
				t.Fatalf("the partition is not served after the hostile script: %d %s", status, body)
			}
		})
	}
}
