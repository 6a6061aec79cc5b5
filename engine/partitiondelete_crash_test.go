package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/pebble"
)

const pkDeleteCrashChildEnv = "ORRERY_PKDELETE_CRASH_CHILD_DIR"

// pkDeleteCrashItems is how many items the partition holds: enough that the
// delete takes many transactions.
const pkDeleteCrashItems = 6000

// TestPartitionKeyDeleteCrashLeavesWholeItems kills a process while it
// deletes a large partition and checks, after reopening, that what is left
// is a set of whole items: each one the read feed lists reads back, an
// indexed filter finds exactly those, and the unique values of the deleted
// ones are free again. Another partition is untouched.
func TestPartitionKeyDeleteCrashLeavesWholeItems(t *testing.T) {
	ctx := t.Context()
	engine.SkipOnPostgres(t, "kills a process writing to a Pebble store and reopens it")
	if dir := os.Getenv(pkDeleteCrashChildEnv); dir != "" {
		pkDeleteCrashChild(ctx, dir)
		return
	}
	if testing.Short() {
		t.Skip("kills a child process")
	}
	dir := t.TempDir()
	withEngine(t, dir, func(e *engine.Engine) {
		e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
		if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},
			"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/u"]}]}}`), nil); err != nil {
			t.Fatal(err)
		}
		for _, pk := range []string{"A", "B"} {
			key := engine.StringKey(pk)
			for i := 0; i < pkDeleteCrashItems; i += 100 {
				ops := make([]string, 0, 100)
				for k := i; k < i+100; k++ {
					ops = append(ops, fmt.Sprintf(`{"operationType":"Create","resourceBody":{"id":"%s%d","pk":%q,"u":%d,"v":%d,"pad":"%s"}}`, pk, k, pk, k, k, strings.Repeat("x", 300)))
				}
				parsed, _ := engine.ParseBatch([]byte("[" + strings.Join(ops, ",") + "]"))
				if res, err := e.ExecuteBatch(ctx, &engine.BatchRequest{Database: "db", Container: "c", PartitionKey: key, HasPartitionKey: true, Atomic: true, Operations: parsed}); err != nil || res.Failed {
					t.Fatalf("filling %s: %v", pk, err)
				}
			}
		}
	})
	// Kill the child at growing delays until a kill lands midway.
	midway := false
	for delay := time.Millisecond; delay < 3*time.Second && !midway; delay *= 3 {
		runPKDeleteCrashChild(t, dir, delay)
		withEngine(t, dir, func(e *engine.Engine) {
			left := checkWholeItems(t, e)
			midway = left > 0 && left < pkDeleteCrashItems
			t.Logf("killed %v after the delete began: %d of %d items left in A", delay, left, pkDeleteCrashItems)
		})
	}
	if !midway {
		t.Skip("no kill landed while the delete was under way on this machine")
	}
}

// checkWholeItems checks the invariants after a crash and returns how many
// items are left in partition A.
func checkWholeItems(t *testing.T, e *engine.Engine) int {
	ctx := t.Context()
	t.Helper()
	query := func(q string, pk string) []json.RawMessage {
		var out []json.RawMessage
		cont := ""
		for {
			res, err := e.QueryItems(context.Background(), &engine.QueryRequest{Database: "db", Container: "c", Query: q,
				PartitionKey: engine.StringKey(pk), HasPartitionKey: true, MaxItems: 1000, Continuation: cont})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Items...)
			if cont = res.Continuation; cont == "" {
				return out
			}
		}
	}
	ids := map[string]bool{}
	for _, raw := range query(`SELECT VALUE c.id FROM c`, "A") {
		var id string
		json.Unmarshal(raw, &id)
		ids[id] = true
		if _, err := e.ReadItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: engine.StringKey("A"), HasPartitionKey: true}); err != nil {
			t.Errorf("item %s is listed but does not read: %v", id, err)
		}
	}
	if got := len(query(`SELECT c.id FROM c WHERE c.v >= 0`, "A")); got != len(ids) {
		t.Errorf("an indexed filter finds %d items of A, the feed %d", got, len(ids))
	}
	if got := len(query(`SELECT c.id FROM c WHERE c.v >= 0`, "B")); got != pkDeleteCrashItems {
		t.Errorf("partition B has %d items, want %d", got, pkDeleteCrashItems)
	}
	// A deleted item's unique value is free; a remaining one's is taken.
	for k := 0; k < pkDeleteCrashItems; k += 97 {
		_, err := e.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", PartitionKey: engine.StringKey("A"), HasPartitionKey: true,
			Body: fmt.Appendf(nil, `{"id":"probe%d","pk":"A","u":%d}`, k, k)})
		taken := engine.StatusOf(err) == 409
		if err != nil && !taken {
			t.Fatal(err)
		}
		if taken != ids[fmt.Sprintf("A%d", k)] {
			t.Errorf("item A%d present %v, but its unique value taken %v", k, ids[fmt.Sprintf("A%d", k)], taken)
		}
		if !taken {
			e.DeleteItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", ID: fmt.Sprintf("probe%d", k), PartitionKey: engine.StringKey("A"), HasPartitionKey: true})
		}
	}
	return len(ids)
}

func runPKDeleteCrashChild(t *testing.T, dir string, delay time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPartitionKeyDeleteCrashLeavesWholeItems$", "-test.count=1")
	cmd.Env = append(os.Environ(), pkDeleteCrashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if lines.Text() == "deleting" {
			time.Sleep(delay)
			cmd.Process.Kill()
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// pkDeleteCrashChild deletes partition A until it is killed.
func pkDeleteCrashChild(ctx context.Context, dir string) {
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		os.Exit(1)
	}
	e, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		os.Exit(1)
	}
	fmt.Println("deleting")
	e.DeleteAllItemsByPartitionKey(ctx, "db", "c", engine.StringKey("A"))
	fmt.Println("done")
	time.Sleep(time.Minute)
}
