package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/pebble"
)

// batchCrashChildEnv names the directory a re-executed test binary runs
// batches in before its parent kills it.
const batchCrashChildEnv = "ORRERY_BATCH_CRASH_CHILD_DIR"

// batchCrashCreates is how many items each batch of the crash test creates,
// besides incrementing its worker's counter.
const batchCrashCreates = 9

// TestBatchCrashAtomicity kills a process running transactional batches with
// SIGKILL and checks, after reopening, that every acknowledged batch is there
// and that no batch is there in part: its creates and its counter increment
// are all there or none is.
func TestBatchCrashAtomicity(t *testing.T) {
	ctx := t.Context()
	engine.SkipOnPostgres(t, "kills a process writing to a Pebble store and reopens it")
	if dir := os.Getenv(batchCrashChildEnv); dir != "" {
		batchCrashChild(ctx, dir, os.Getenv(batchCrashChildEnv+"_ROUND"))
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	dir := t.TempDir()
	withEngine(t, dir, func(e *engine.Engine) {
		if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil); err != nil {
			t.Fatal(err)
		}
	})
	for round := range 2 {
		acked := runBatchCrashChild(t, dir, fmt.Sprint(round))
		withEngine(t, dir, func(e *engine.Engine) {
			parts := map[string]int{}    // batch id -> items found
			counters := map[string]int{} // worker partition -> counter
			batches := map[string]int{}  // worker partition -> whole batches found
			cont := ""
			for {
				res, err := e.QueryItems(context.Background(), &engine.QueryRequest{Database: "db", Container: "c", Query: "SELECT c.id, c.pk, c.n, c.batch FROM c", MaxItems: 1000, Continuation: cont})
				if err != nil {
					t.Fatal(err)
				}
				for _, raw := range res.Items {
					var it struct {
						ID, PK, Batch string
						N             int
					}
					json.Unmarshal(raw, &it)
					if strings.HasPrefix(it.ID, "counter") {
						counters[it.PK] = it.N
					} else {
						parts[it.Batch]++
					}
				}
				if cont = res.Continuation; cont == "" {
					break
				}
			}
			for _, id := range acked {
				if parts[id] != batchCrashCreates {
					t.Errorf("round %d: acknowledged batch %s has %d of its %d items", round, id, parts[id], batchCrashCreates)
				}
			}
			for id, n := range parts {
				if n != batchCrashCreates {
					t.Errorf("round %d: batch %s is there in part: %d of %d items", round, id, n, batchCrashCreates)
				}
				pk, _, _ := strings.Cut(id, ".")
				batches[pk]++
			}
			for pk, n := range counters {
				if n != batches[pk] {
					t.Errorf("round %d: partition %s has %d whole batches but its counter says %d", round, pk, batches[pk], n)
				}
			}
			t.Logf("round %d: %d batches acknowledged before SIGKILL, %d found whole after reopening, none in part", round, len(acked), len(parts))
		})
	}
}

func withEngine(t *testing.T, dir string, fn func(e *engine.Engine)) {
	ctx := t.Context()
	t.Helper()
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	e, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		t.Fatalf("opening the engine: %v", err)
	}
	fn(e)
	e.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// runBatchCrashChild starts a child that runs batches in dir, kills it once
// it has acknowledged some, and returns the ids of the acknowledged batches.
func runBatchCrashChild(t *testing.T, dir, round string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBatchCrashAtomicity$", "-test.count=1")
	cmd.Env = append(os.Environ(), batchCrashChildEnv+"="+dir, batchCrashChildEnv+"_ROUND="+round)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	killed := false
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		id, ok := strings.CutPrefix(lines.Text(), "ack ")
		if !ok {
			continue
		}
		acked = append(acked, id)
		if len(acked) == 200 && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("round %s: the child acknowledged only %d batches before it stopped; stderr:\n%s", round, len(acked), stderr.String())
	}
	return acked
}

// batchCrashChild runs batches from several goroutines, each in its own
// partition: nine creates and an increment of the partition's counter. It
// prints each batch's id once ExecuteBatch returns, until it is killed (or
// gives up after fifteen seconds, should its parent be gone).
func batchCrashChild(ctx context.Context, dir, round string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		fail(err)
	}
	e, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		fail(err)
	}
	var out sync.Mutex
	stop := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			pk := fmt.Sprintf("r%s-w%d", round, w)
			key, _ := engine.ParsePartitionKeyHeader(`["` + pk + `"]`)
			if _, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: key, HasPartitionKey: true,
				Body: fmt.Appendf(nil, `{"id":"counter","pk":%q,"n":0}`, pk)}); err != nil {
				fail(err)
			}
			for i := 0; time.Now().Before(stop); i++ {
				id := fmt.Sprintf("%s.%d", pk, i)
				ops := make([]string, 0, batchCrashCreates+1)
				for k := range batchCrashCreates {
					ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"%s-%d","pk":%q,"batch":%q,"pad":"%s"}}`, id, k, pk, id, strings.Repeat("x", 200)))
				}
				ops = append(ops, `{"operationType":"Patch","id":"counter","resourceBody":{"operations":[{"op":"incr","path":"/n","value":1}]}}`)
				parsed, err := engine.ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
				if err != nil {
					fail(err)
				}
				res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: key, HasPartitionKey: true, Atomic: true, Operations: parsed})
				if err != nil {
					fail(err)
				}
				if res.Failed {
					fail(fmt.Errorf("batch %s failed: %+v", id, res.Results))
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", id)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(2)
}
