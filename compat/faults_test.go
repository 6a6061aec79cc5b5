package compat

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/orrerytest"
)

// sdkOutcome names what an SDK call ended with: "ok", the status (and
// substatus) of a Cosmos error it surfaced, or "conn" for a transport error.
func sdkOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if re.RawResponse != nil {
			if sub := re.RawResponse.Header.Get("x-ms-substatus"); sub != "" && sub != "0" {
				return strconv.Itoa(re.StatusCode) + "/" + sub
			}
		}
		return strconv.Itoa(re.StatusCode)
	}
	return "conn"
}

// faultCase is one row of the SDKs' fault table: a result injected once
// into one kind of operation, and what the SDK did with it.
type faultCase struct {
	result faults.Result
	op     string // ReadItem, CreateItem, QueryItem, BatchItem, ChangeFeedItem, ExecuteStoredProcedure
	// want is the SDK's outcome: "ok" after a retry, or the error it
	// surfaced; applied is whether a create is then found.
	want    string
	applied bool
	// always, when set, fires the rule on every attempt (not once), to
	// count the attempts the SDK makes before it gives up: hits.
	always bool
	hits   int64
}

// goFaultCases are what the Go SDK (azcosmos) does with each fault, once.
var goFaultCases = []faultCase{
	{faults.Result{Type: faults.TooManyRequests, RetryAfter: faults.Duration(300 * time.Millisecond)}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.TooManyRequests}, "CreateItem", "ok", true, false, 0},
	{faults.Result{Type: faults.TooManyRequests, RetryAfter: faults.Duration(10 * time.Millisecond)}, "ReadItem", "429/3200", false, true, 4},
	{faults.Result{Type: faults.TooManyRequests}, "QueryItem", "ok", false, false, 0},
	{faults.Result{Type: faults.TooManyRequests}, "BatchItem", "ok", true, false, 0},
	{faults.Result{Type: faults.TooManyRequests}, "ChangeFeedItem", "ok", false, false, 0},
	{faults.Result{Type: faults.Timeout}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.Timeout}, "CreateItem", "408", false, false, 0},
	{faults.Result{Type: faults.ServiceUnavailable}, "ReadItem", "503", false, false, 0},
	{faults.Result{Type: faults.ServiceUnavailable}, "CreateItem", "503", false, false, 0},
	{faults.Result{Type: faults.InternalServerError}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.InternalServerError}, "CreateItem", "500", false, false, 0},
	{faults.Result{Type: faults.RetryWith}, "ReadItem", "449", false, false, 0},
	{faults.Result{Type: faults.RetryWith}, "CreateItem", "449", false, false, 0},
	{faults.Result{Type: faults.PartitionIsGone}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.PartitionIsGone}, "CreateItem", "ok", true, false, 0},
	{faults.Result{Type: faults.PartitionIsGone}, "QueryItem", "ok", false, false, 0},
	{faults.Result{Type: faults.PartitionIsGone}, "ChangeFeedItem", "ok", false, false, 0},
	{faults.Result{Type: faults.PartitionIsSplitting}, "ReadItem", "410/1007", false, false, 0},
	{faults.Result{Type: faults.ResponseDelay, Delay: faults.Duration(300 * time.Millisecond)}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.ConnectionReset}, "ReadItem", "ok", false, false, 0},
	{faults.Result{Type: faults.ConnectionReset}, "CreateItem", "conn", false, false, 0},
	{faults.Result{Type: faults.AppliedThenLost}, "CreateItem", "conn", true, false, 0},
	{faults.Result{Type: faults.AppliedThenLost, Lost: faults.LostServiceUnavailable}, "CreateItem", "503", true, false, 0},
	{faults.Result{Type: faults.AppliedThenLost, Lost: faults.LostTimeout}, "CreateItem", "408", true, false, 0},
	{faults.Result{Type: faults.AppliedThenLost, Lost: faults.LostServiceUnavailable}, "BatchItem", "503", true, false, 0},
	{faults.Result{Type: faults.LostBeforeApply}, "CreateItem", "conn", false, false, 0},
	{faults.Result{Type: faults.LostBeforeApply, Lost: faults.LostServiceUnavailable}, "CreateItem", "503", false, false, 0},
}

// TestGoSDKUnderEachFault injects each fault once into one kind of request
// of the Go SDK and checks what the SDK does: retries (429 after its
// retry-after, 408 and 500 and a reset connection on reads) or surfaces the
// error (writes, 503, 449, 410/1007), follows a real split, and whether a write whose reply was lost
// was applied. Its log is the Go column of the README's fault table.
func TestGoSDKUnderEachFault(t *testing.T) {
	srv := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, srv, "faults", "go", "/pk")
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.UpsertItem(ctx, pk, []byte(`{"id":"seed","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	// run performs one operation of kind op; id is the item a write creates.
	run := func(ctx context.Context, op string) (id string, err error) {
		id = fmt.Sprintf("w%d", n.Add(1))
		doc := []byte(`{"id":"` + id + `","pk":"p"}`)
		switch op {
		case "ReadItem":
			_, err = c.ReadItem(ctx, pk, "seed", nil)
		case "CreateItem":
			_, err = c.CreateItem(ctx, pk, doc, nil)
		case "QueryItem":
			pager := c.NewQueryItemsPager("SELECT * FROM c", pk, nil)
			_, err = pager.NextPage(ctx)
		case "BatchItem":
			b := c.NewTransactionalBatch(pk)
			b.CreateItem(doc, nil)
			var res azcosmos.TransactionalBatchResponse
			if res, err = c.ExecuteTransactionalBatch(ctx, b, nil); err == nil && !res.Success {
				err = fmt.Errorf("batch failed")
			}
		case "ChangeFeedItem":
			ranges, ferr := c.ReadFeedRanges(ctx, nil)
			if ferr != nil {
				return id, ferr
			}
			_, err = c.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &ranges[0]})
		default:
			t.Fatalf("no operation %s", op)
		}
		return id, err
	}
	var table []string
	for i, fc := range goFaultCases {
		name := fmt.Sprintf("%s_%s", fc.result.Type, fc.op)
		if fc.result.Lost != "" {
			name += "_" + fc.result.Lost
		}
		t.Run(name, func(t *testing.T) {
			ruleID, probe := fmt.Sprintf("go-%d", i), fmt.Sprintf("go-%d-pkranges", i)
			times := int64(1)
			if fc.always {
				times = 0
			}
			// The probe counts the partition key range reads (the
			// SDK's routing refresh) without changing them.
			if _, err := srv.Faults.Add(faults.Rule{ID: ruleID, Times: times, Result: fc.result,
				Condition: faults.Condition{Container: "go", Operations: []string{fc.op}}},
				faults.Rule{ID: probe, Result: faults.Result{Type: faults.ResponseDelay, Delay: faults.Duration(time.Microsecond)},
					Condition: faults.Condition{Container: "go", Operations: []string{"MetadataPartitionKeyRanges"}}}); err != nil {
				t.Fatal(err)
			}
			defer srv.Faults.Remove(ruleID)
			defer srv.Faults.Remove(probe)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			start := time.Now()
			id, err := run(cctx, fc.op)
			elapsed := time.Since(start)
			got := sdkOutcome(err)
			st, _ := srv.Faults.Get(ruleID)
			refreshes, _ := srv.Faults.Get(probe)
			if want := max(fc.hits, 1); st.Hits != want {
				t.Errorf("the rule fired %d times, want %d", st.Hits, want)
			}
			applied := false
			if strings.HasSuffix(fc.op, "Item") && fc.op != "ReadItem" && fc.op != "QueryItem" && fc.op != "ChangeFeedItem" {
				_, rerr := c.ReadItem(ctx, pk, id, nil)
				applied = rerr == nil
			}
			table = append(table, fmt.Sprintf("%-22s %-34s %-9s attempts faulted=%d applied=%-5v pkranges reads=%d %v", fc.result.Type, fc.op+" "+fc.result.Lost, got, st.Hits, applied, refreshes.Hits, elapsed.Round(10*time.Millisecond)))
			if fc.result.Type == faults.PartitionIsGone && fc.op == "ChangeFeedItem" && got == "ok" && refreshes.Hits == 0 {
				// Requests routed by partition key need no refresh: the
				// gateway routes them to the child.
				t.Errorf("the change feed went on after a split without reading the partition key ranges again")
			}
			if got != fc.want {
				t.Errorf("the Go SDK ended with %s (%v), want %s", got, err, fc.want)
			}
			if applied != fc.applied {
				t.Errorf("applied: %v, want %v", applied, fc.applied)
			}
			if fc.result.Type == faults.TooManyRequests && got == "ok" && elapsed < time.Duration(fc.result.RetryAfter) {
				t.Errorf("the retry came after %v, before the retry-after of %v", elapsed, time.Duration(fc.result.RetryAfter))
			}
			if fc.result.Type == faults.ResponseDelay && elapsed < time.Duration(fc.result.Delay) {
				t.Errorf("answered after %v, before the delay of %v", elapsed, time.Duration(fc.result.Delay))
			}
		})
	}
	t.Logf("the Go SDK under each fault, once:\n%s", strings.Join(table, "\n"))
}

// TestPythonSDKUnderFaults runs compat/python/faults4.py: what azure-cosmos
// 4.x does with each fault once (its column of the README's fault table),
// and the seeds' counter when committed writes lose their replies.
func TestPythonSDKUnderFaults(t *testing.T) {
	python, pythonPath := pythonSDK(t)
	srv := orrerytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "faults4")
	cmd.Dir = pythonSuiteDir
	cmd.Env = append(withPythonPath(pythonPath), "ORRERY_ENDPOINT="+srv.Endpoint, "ORRERY_KEY="+srv.Key, "PYTHONWARNINGS=ignore::ResourceWarning")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python fault suite failed: %v\n%s", err, out)
	}
	if m := pythonRan.FindSubmatch(out); m == nil || string(m[1]) != "3" {
		t.Fatalf("the Python fault suite did not run its 3 tests:\n%s", out)
	}
	t.Logf("%s", out)
}

// BenchmarkSDKPointReadWithFaultRule is BenchmarkSDKPointRead with a fault
// rule installed that never fires (another container's): the cost of
// matching a request against a rule, which a server with no rule never pays.
func BenchmarkSDKPointReadWithFaultRule(b *testing.B) {
	s := orrerytest.StartWith(b, orrerytest.Options{Dir: b.TempDir(),
		Faults: []faults.Rule{{ID: "elsewhere", Condition: faults.Condition{Container: "other"}, Result: faults.Result{Type: faults.Timeout}}}})
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "bench"}, nil); err != nil {
		b.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("bench")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		b.Fatal(err)
	}
	c, _ := db.NewContainer("c")
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.CreateItem(ctx, pk, benchItem("r"), nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.ReadItem(ctx, pk, "r", nil); err != nil {
			b.Fatal(err)
		}
	}
}
