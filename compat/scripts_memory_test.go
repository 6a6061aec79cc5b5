package compat

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
)

// heapNow returns the heap's live bytes as of the last collection and the
// bytes its objects occupy now.
func heapNow() (live, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestScriptMemoryBudgetBoundsConcurrentHogs starts procedures that each
// take most of one run's memory limit and then hold it, one after another in
// partitions of their own, each once the one before holds its memory (or
// was stopped): each alone is within its own limit, eight together are far
// beyond the budget all runs share. The live heap, measured after a
// collection while they hold their memory and sampled throughout, must stay
// within that budget and some slack, and runs beyond it must have been
// stopped with the memory-limit error.
func TestScriptMemoryBudgetBoundsConcurrentHogs(t *testing.T) {
	const (
		mib     = 1 << 20
		perRun  = 64 * mib
		total   = 96 * mib
		holds   = 40 * mib // what each procedure makes and holds
		hogs    = 8
		slack   = 48 * mib // one run's allocation between two checks, and the server's own
		timeout = 60 * time.Second
	)
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{
		ScriptLimits:         script.Limits{Timeout: timeout, MaxMemory: perRun, MaxTotalMemory: total},
		MaxConcurrentScripts: hogs,
	}})
	newContainer(t, s, "db", "items", "/pk")
	createSproc(t, s, "db", "items", "hog", `function hog(kib) {
		var held = [];
		for (var i = 0; i < kib; i++) held.push("y".repeat(1000) + i);
		while (held.length > 0) {}
	}`)
	// The base is the live heap once what earlier tests of the process left
	// behind has been freed: collect until it stops shrinking.
	runtime.GC()
	base, _ := heapNow()
	for settle := time.Now().Add(10 * time.Second); time.Now().Before(settle); {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		now, _ := heapNow()
		if now+mib/2 >= base {
			base = min(base, now)
			break
		}
		base = now
	}
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if live, _ := heapNow(); live > peak.Load() {
				peak.Store(live)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopped, holding atomic.Int64
	var wg sync.WaitGroup
	for i := range hogs {
		holding.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer holding.Add(-1)
			status, body, err := executeSprocCtx(ctx, s, "db", "items", "hog", "hog"+strconv.Itoa(i), holds/1024)
			switch {
			case err != nil && ctx.Err() != nil:
				// held on until cancelled
			case err != nil:
				t.Errorf("hog %d: %v", i, err)
			case status == http.StatusBadRequest:
				stopped.Add(1)
			default:
				t.Errorf("hog %d answered %d %s, want 400 (stopped for memory) or to hold on until cancelled", i, status, body)
			}
		}()
		// The next one starts once every one still running holds its
		// memory: the live heap, collected, has grown by all of it.
		for deadline := time.Now().Add(timeout / 2); ; time.Sleep(5 * time.Millisecond) {
			target := base + uint64(holding.Load())*(holds-holds/8)
			if _, objects := heapNow(); objects >= target {
				// Maybe: a collection tells.
				runtime.GC()
				if live, _ := heapNow(); live >= target {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("hog %d never held its memory", i)
			}
		}
	}
	runtime.GC()
	held, _ := heapNow()
	cancel()
	wg.Wait()
	close(stopSampling)
	<-sampled
	grownHeld, grownPeak := int64(held)-int64(base), int64(peak.Load())-int64(base)
	t.Logf("%d procedures of %d MiB each, budget %d MiB: %d stopped; live heap grown %d MiB with all started, at most %d MiB sampled",
		hogs, holds/mib, total/mib, stopped.Load(), grownHeld/mib, grownPeak/mib)
	if grownHeld > total+slack {
		t.Errorf("with %d procedures holding %d MiB each the live heap grew %d MiB, beyond the %d MiB budget (and %d MiB slack)",
			hogs, holds/mib, grownHeld/mib, total/mib, slack/mib)
	}
	if grownPeak > total+2*slack {
		t.Errorf("the live heap peaked %d MiB over its base, beyond the %d MiB budget (and %d MiB slack)", grownPeak/mib, total/mib, 2*slack/mib)
	}
	if stopped.Load() == 0 {
		t.Error("no procedure was stopped for memory, though together they hold far beyond the budget")
	}
}

// TestDoublingScriptsLeavePointReadsAnswered runs a procedure doubling a
// string in four partitions at once, with the default limits, while readers
// of other partitions read items through the SDK. Every doubling procedure
// must end stopped with the memory-limit error, or on a loaded machine with
// the time budget's 408 (a 429 for a short slot overrun, or for no slot
// freed in its budget, is retried as the SDKs retry it), and every point
// read must be answered: runaway scripts share one
// memory budget and at most half the cores, so they hold up no read.
func TestDoublingScriptsLeavePointReadsAnswered(t *testing.T) {
	const doublers, readers = 4, 4
	s := orrerytest.StartWith(t, orrerytest.Options{})
	c := newContainer(t, s, "db", "items", "/pk")
	createSproc(t, s, "db", "items", "double", doublingSproc)
	res := readWhileStringsDouble(t, s, c, doublers, readers)
	t.Logf("%d doubling procedures stopped, %d at the memory limit and %d at the time budget; %d point reads answered meanwhile (%d during the runs that were stopped), %d failed",
		doublers, res.byMemory, res.byTime, len(res.latencies), res.readsDuring, res.failed)
	if res.failed > 0 {
		t.Errorf("%d point reads failed while strings doubled", res.failed)
	}
	if res.readsDuring == 0 {
		t.Error("no point read was answered while the doubling procedures ran")
	}
}

// BenchmarkPointReadsWhileStringsDouble reports the point reads' latency
// (median and 99th percentile) while four procedures double strings until
// stopped at the memory limit, with the default limits.
func BenchmarkPointReadsWhileStringsDouble(b *testing.B) {
	const doublers, readers = 4, 4
	s := orrerytest.StartWith(b, orrerytest.Options{})
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		b.Fatal(err)
	}
	d, err := s.Client.NewDatabase("db")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "items",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		b.Fatal(err)
	}
	c, err := d.NewContainer("items")
	if err != nil {
		b.Fatal(err)
	}
	createSproc(b, s, "db", "items", "double", doublingSproc)
	var all []time.Duration
	for b.Loop() {
		all = append(all, readWhileStringsDouble(b, s, c, doublers, readers).latencies...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// doublingSproc doubles a string until it is stopped.
const doublingSproc = `function double() {
	var s = "0123456789abcdef";
	for (;;) { s = s + s; }
}`

// doublingResult is what readWhileStringsDouble saw.
type doublingResult struct {
	latencies   []time.Duration // of the reads answered
	failed      int64           // reads failed
	readsDuring int64           // reads answered while a doubling procedure ran, summed over them
	byMemory    int64           // doubling procedures stopped at the memory limit
	byTime      int64           // doubling procedures stopped at the time budget (a loaded machine)
}

// readWhileStringsDouble runs procedure double of db/items (doublingSproc)
// in each of doublers partitions at once, each until it is answered with
// something but 429 (retried as the SDKs retry it), and fails t unless each
// was stopped with the memory-limit error or the time budget's; meanwhile readers read an item
// each of other partitions through the SDK, one read after another.
func readWhileStringsDouble(t testing.TB, s *orrerytest.Server, c *azcosmos.ContainerClient, doublers, readers int) doublingResult {
	t.Helper()
	for i := range readers {
		pk := "r" + strconv.Itoa(i)
		if _, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), []byte(`{"id":"item","pk":"`+pk+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var mu sync.Mutex
	var res doublingResult
	var reads, failed atomic.Int64
	var rg sync.WaitGroup
	for i := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			key := azcosmos.NewPartitionKeyString("r" + strconv.Itoa(i))
			var mine []time.Duration
			defer func() {
				mu.Lock()
				res.latencies = append(res.latencies, mine...)
				mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				start := time.Now()
				_, err := c.ReadItem(ctx, key, "item", nil)
				cancel()
				if err != nil {
					if failed.Add(1) <= 5 {
						t.Errorf("point read of r%d while strings double: %v", i, err)
					}
					continue
				}
				mine = append(mine, time.Since(start))
				reads.Add(1)
			}
		}()
	}

	var wg sync.WaitGroup
	var readsDuring, byMemory, byTime atomic.Int64
	for i := range doublers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := "d" + strconv.Itoa(i)
			for attempt := 0; ; attempt++ {
				before := reads.Load()
				status, body, err := executeSprocCtx(context.Background(), s, "db", "items", "double", pk)
				if err != nil {
					t.Errorf("doubling in %s: %v", pk, err)
					return
				}
				if status == http.StatusTooManyRequests && attempt < 20 {
					continue
				}
				var cosmosErr struct{ Code, Message string }
				err = json.Unmarshal(body, &cosmosErr)
				switch {
				case err == nil && status == http.StatusBadRequest && cosmosErr.Code == "BadRequest" &&
					strings.Contains(cosmosErr.Message, "memory limit"):
					byMemory.Add(1)
				case err == nil && status == http.StatusRequestTimeout && cosmosErr.Code == "RequestTimeout" &&
					strings.Contains(cosmosErr.Message, "time budget"):
					// Stopped by its other limit: on a loaded machine the
					// slot's wait and the doubling can outlast the time
					// budget before the string reaches the memory limit.
					byTime.Add(1)
				default:
					t.Errorf("doubling in %s: %d %s, want 400 BadRequest with the memory-limit error (or 408 for the time budget)", pk, status, body)
				}
				readsDuring.Add(reads.Load() - before)
				return
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	res.failed, res.readsDuring = failed.Load(), readsDuring.Load()
	res.byMemory, res.byTime = byMemory.Load(), byTime.Load()
	return res
}
