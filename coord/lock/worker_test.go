package lock_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
)

// The multi-process tests re-execute this test binary as workers: TestMain
// sees workerEnv and runs runWorker instead of the tests.
const workerEnv = "COORD_LOCK_WORKER"

// worker starts this test binary as a worker of the given kind against the
// test server, with extra environment.
func worker(t *testing.T, kind string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), server.Env()...), workerEnv+"="+kind)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// contendResult is what a contend worker reports.
type contendResult struct {
	Sections int      // critical sections entered with an accepted fenced write
	Overlaps int      // another holder entered while this one held the lock
	Fenced   int      // fenced writes rejected (only after a lost lock)
	Lost     int      // sections whose lock was lost before they ended
	Errors   []string // anything else
	Dropped  int      // replies the fault injection dropped
}

// dropper is the worker's fault injection, if any.
var dropper *faults

func runWorker(kind string) int {
	s := &cosmostest.Server{Endpoint: os.Getenv("COORD_TEST_ENDPOINT"), Key: os.Getenv("COORD_TEST_KEY")}
	c, err := s.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, _ := c.NewDatabase(os.Getenv("COORD_LOCK_DB"))
	locks, _ := d.NewContainer("locks")
	if p, _ := strconv.ParseFloat(os.Getenv("COORD_LOCK_DROP"), 64); p > 0 {
		// The lock's own traffic loses this share of its replies after
		// the server applied the request.
		f := &faults{drop: func(*http.Request) bool { return rand.Float64() < p }}
		dropper = f
		lc, err := s.NewClient(&azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
			PerRetryPolicies: []policy.Policy{f},
			Retry:            policy.RetryOptions{RetryDelay: 10 * time.Millisecond},
		}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		ld, _ := lc.NewDatabase(os.Getenv("COORD_LOCK_DB"))
		locks, _ = ld.NewContainer("locks")
	}
	l := lock.New(locks)
	ctx := context.Background()
	switch kind {
	case "contend":
		data, _ := d.NewContainer("data")
		n, _ := strconv.Atoi(os.Getenv("COORD_LOCK_GOROUTINES"))
		rounds, _ := strconv.Atoi(os.Getenv("COORD_LOCK_ROUNDS"))
		var mu sync.Mutex
		var res contendResult
		var wg sync.WaitGroup
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					me := fmt.Sprintf("%d.%d.%d", os.Getpid(), g, r)
					out := contendOnce(ctx, l, data, me)
					mu.Lock()
					res.Sections += out.Sections
					res.Overlaps += out.Overlaps
					res.Fenced += out.Fenced
					res.Lost += out.Lost
					res.Errors = append(res.Errors, out.Errors...)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if dropper != nil {
			res.Dropped = dropper.droppedCount()
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return 0
	case "zombie":
		return runZombie(ctx, l, d)
	case "hold":
		h, err := l.Acquire(ctx, "held", &lock.Options{TTL: holdTTL, Owner: "victim"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("HELD %d\n", h.Token())
		select {} // renewing until killed
	}
	fmt.Fprintln(os.Stderr, "unknown worker", kind)
	return 2
}

// contendOnce runs one critical section: acquire, a fenced write that marks
// the protected item as inside this section and appends the token, a pause,
// then a write that leaves only if the item still says this section is
// inside. If any other holder entered meanwhile, that write fails.
func contendOnce(ctx context.Context, l *lock.Locker, data *azcosmos.ContainerClient, me string) (res contendResult) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	h, err := l.Acquire(ctx, "seat-map", &lock.Options{TTL: 10 * time.Second, Owner: me})
	if err != nil {
		res.Errors = append(res.Errors, "acquire: "+err.Error())
		return res
	}
	defer h.Release(context.Background())
	pk := azcosmos.NewPartitionKeyString("p")
	var enter azcosmos.PatchOperations
	enter.AppendSet("/inside", me)
	enter.AppendAdd("/accepted/-", h.Token())
	if _, err := lock.FencedPatch(ctx, data, pk, "p", h.Fence(), enter); err != nil {
		if errors.Is(err, lock.ErrFenced) {
			res.Fenced++
		} else {
			res.Errors = append(res.Errors, "enter: "+err.Error())
		}
		return res
	}
	res.Sections++
	time.Sleep(2 * time.Millisecond)
	var leave azcosmos.PatchOperations
	leave.AppendSet("/inside", "")
	leave.SetCondition(fmt.Sprintf("FROM c WHERE c.inside = '%s'", me))
	if _, err := data.PatchItem(ctx, pk, "p", leave, nil); err != nil {
		switch {
		case h.Err() != nil:
			res.Lost++
		case strings.Contains(err.Error(), "412"):
			res.Overlaps++
		default:
			res.Errors = append(res.Errors, "leave: "+err.Error())
		}
	}
	return res
}

// 64 goroutines in 3 OS processes contend on one name, each critical
// section writing the protected item with its fence: no two sections
// overlap and the accepted fences are strictly increasing.
func TestContentionAcrossProcesses(t *testing.T) {
	contend(t, []int{22, 21, 21}, 0)
}

// The same with a tenth of the lock's replies lost after the server
// applied the request (acquisitions, renewals and releases alike): every
// ambiguous outcome is settled without a double grant.
func TestContentionWithLostReplies(t *testing.T) {
	contend(t, []int{8, 8}, 0.1)
}

func contend(t *testing.T, per []int, drop float64) {
	c := client(t, nil)
	db := newDB(t, c)
	lockContainer(t, c, db)
	data := dataContainer(t, c, db)
	ctx := context.Background()
	if _, err := data.CreateItem(ctx, azcosmos.NewPartitionKeyString("p"), []byte(`{"id":"p","pk":"p","inside":"","accepted":[]}`), nil); err != nil {
		t.Fatal(err)
	}
	const rounds = 2
	goroutines := 0
	for _, n := range per {
		goroutines += n
	}
	outs := make([]strings.Builder, len(per))
	cmds := make([]*exec.Cmd, len(per))
	for i, n := range per {
		cmds[i] = worker(t, "contend", "COORD_LOCK_DB="+db, fmt.Sprintf("COORD_LOCK_GOROUTINES=%d", n), fmt.Sprintf("COORD_LOCK_ROUNDS=%d", rounds), fmt.Sprintf("COORD_LOCK_DROP=%g", drop))
		cmds[i].Stdout = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var total contendResult
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		var r contendResult
		if err := json.Unmarshal([]byte(outs[i].String()), &r); err != nil {
			t.Fatalf("worker %d said %q: %v", i, outs[i].String(), err)
		}
		total.Sections += r.Sections
		total.Overlaps += r.Overlaps
		total.Fenced += r.Fenced
		total.Lost += r.Lost
		total.Errors = append(total.Errors, r.Errors...)
		total.Dropped += r.Dropped
	}
	if drop > 0 && total.Dropped == 0 {
		t.Fatal("no reply was dropped")
	}
	t.Logf("%+v", total)
	if len(total.Errors) > 0 {
		t.Fatalf("errors: %q", total.Errors)
	}
	if total.Overlaps != 0 {
		t.Fatalf("%d critical sections overlapped another holder's", total.Overlaps)
	}
	if total.Lost+total.Fenced > 0 {
		// Allowed (a holder starved of CPU past its TTL is fenced out),
		// but worth seeing in the log.
		t.Logf("%d sections lost their lock, %d fenced writes were rejected", total.Lost, total.Fenced)
	}
	r, err := data.ReadItem(ctx, azcosmos.NewPartitionKeyString("p"), "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Inside   string
		Accepted []int64
	}
	if err := json.Unmarshal(r.Value, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Accepted) != total.Sections || total.Sections < goroutines*rounds-total.Lost-total.Fenced {
		t.Fatalf("%d fences accepted, %d sections reported", len(doc.Accepted), total.Sections)
	}
	for i := 1; i < len(doc.Accepted); i++ {
		if doc.Accepted[i] <= doc.Accepted[i-1] {
			t.Fatalf("accepted fences not strictly increasing at %d: %v", i, doc.Accepted)
		}
	}
}

const holdTTL = 3 * time.Second

// A holder killed with SIGKILL stops renewing; the database expires its
// lease and another acquirer gets the lock within the TTL plus its own
// polling interval. The bound asserted is TTL + 5 s: the expiry itself is
// at most TTL after the victim's last renewal (the service truncates write
// timestamps to seconds, which only makes it earlier), Acquire's backoff
// is capped at 1 s, and the rest is slack for a loaded machine.
func TestKilledHolderIsReplacedAfterTTL(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	cmd := worker(t, "hold", "COORD_LOCK_DB="+db)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	victim, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "HELD ")), 10, 64)
	// Let it renew a few times first.
	time.Sleep(holdTTL)
	ctx := context.Background()
	if _, err := l.TryAcquire(ctx, "held", nil); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("while the victim lives: %v, want ErrHeld", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	actx, cancel := context.WithTimeout(ctx, holdTTL+5*time.Second)
	defer cancel()
	h, err := l.Acquire(actx, "held", &lock.Options{TTL: holdTTL})
	if err != nil {
		t.Fatalf("not acquired within TTL + 5 s of the kill: %v", err)
	}
	t.Logf("acquired %v after SIGKILL (TTL %v)", time.Since(killed).Round(time.Millisecond), holdTTL)
	if h.Token() <= victim {
		t.Fatalf("token %d not above the victim's %d", h.Token(), victim)
	}
	h.Release(ctx)
}

// zombieReport is what the zombie worker says after it was resumed.
type zombieReport struct {
	Token   int64
	Lost    bool              // Lost had fired when it was resumed
	Results map[string]string // per write: "ok", "fenced" or the error
}

// runZombie is a holder that writes two protected items, then waits (it
// is stopped with SIGSTOP meanwhile, past its lease) and, told to go on,
// writes them again with its old fence as if it still held the lock.
func runZombie(ctx context.Context, l *lock.Locker, d *azcosmos.DatabaseClient) int {
	data, _ := d.NewContainer("data")
	pk := azcosmos.NewPartitionKeyString("p")
	h, err := l.Acquire(ctx, "zone", &lock.Options{TTL: 2 * time.Second, Owner: "zombie"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, id := range []string{"touched", "untouched"} {
		var ops azcosmos.PatchOperations
		ops.AppendSet("/value", "zombie")
		if _, err := lock.FencedPatch(ctx, data, pk, id, h.Fence(), ops); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	fmt.Printf("WROTE %d\n", h.Token())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil && err != io.EOF {
		return 2
	}
	rep := zombieReport{Token: h.Token(), Results: map[string]string{}}
	// Its renewal loop, resumed too, finds the lease gone at once; the
	// writes below ignore that, as a holder that checks too late would.
	select {
	case <-h.Lost():
		rep.Lost = true
	case <-time.After(5 * time.Second):
	}
	f := h.Fence()
	item := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"id":%q,"pk":"p","value":"zombie-late"}`, id))
	}
	patch := func() azcosmos.PatchOperations {
		var ops azcosmos.PatchOperations
		ops.AppendSet("/value", "zombie-late")
		return ops
	}
	writes := map[string]func() error{
		"replace": func() error { _, err := lock.FencedReplace(ctx, data, pk, "touched", item("touched"), f); return err },
		"upsert":  func() error { _, err := lock.FencedUpsert(ctx, data, pk, item("touched"), f); return err },
		"patch":   func() error { _, err := lock.FencedPatch(ctx, data, pk, "touched", f, patch()); return err },
		"delete":  func() error { _, err := lock.FencedDelete(ctx, data, pk, "touched", f); return err },
		"create":  func() error { _, err := lock.FencedCreate(ctx, data, pk, item("successor"), f); return err },
		"batch": func() error {
			b := lock.NewFencedBatch(data, pk, f)
			b.PatchItem("untouched", patch())
			b.ReplaceItem("touched", item("touched"))
			_, err := b.Execute(ctx, nil)
			return err
		},
		// Last: the item the successor never wrote still carries the
		// zombie's own token, so this write passes (see the package doc).
		"untouched": func() error { _, err := lock.FencedPatch(ctx, data, pk, "untouched", f, patch()); return err },
	}
	for _, name := range []string{"replace", "upsert", "patch", "delete", "create", "batch", "untouched"} {
		switch err := writes[name](); {
		case err == nil:
			rep.Results[name] = "ok"
		case errors.Is(err, lock.ErrFenced):
			rep.Results[name] = "fenced"
		default:
			rep.Results[name] = err.Error()
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// A holder process is paused with SIGSTOP past its lease; its successor
// takes the lock and writes one of the two items the paused holder wrote
// (a fenced batch that also creates a third). Resumed with SIGCONT, the
// old holder writes with its old fence as if nothing happened: every write
// to the item its successor wrote, and the create of the successor's item,
// is refused, whatever its kind; the write to the item the successor never
// touched passes, as the package documentation says it does.
func TestPausedHolderProcessIsFencedOut(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	data := dataContainer(t, c, db)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	for _, id := range []string{"touched", "untouched"} {
		if _, err := data.CreateItem(ctx, pk, []byte(fmt.Sprintf(`{"id":%q,"pk":"p","value":"new"}`, id)), nil); err != nil {
			t.Fatal(err)
		}
	}
	cmd := worker(t, "zombie", "COORD_LOCK_DB="+db)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "WROTE ") {
		t.Fatalf("zombie said %q (%v)", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// The successor gets the lock once the paused holder's lease expires.
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := l.Acquire(actx, "zone", &lock.Options{TTL: 30 * time.Second, Owner: "successor"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("successor acquired %v after the pause", time.Since(paused).Round(time.Millisecond))
	b := lock.NewFencedBatch(data, pk, h.Fence())
	b.ReplaceItem("touched", []byte(`{"id":"touched","pk":"p","value":"successor"}`))
	b.CreateItem([]byte(`{"id":"successor","pk":"p","value":"successor"}`))
	if _, err := b.Execute(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	var rep zombieReport
	if err := json.NewDecoder(out).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("zombie token %d, successor token %d: %+v", rep.Token, h.Token(), rep)
	for _, w := range []string{"replace", "upsert", "patch", "delete", "create", "batch"} {
		if rep.Results[w] != "fenced" {
			t.Errorf("the resumed holder's %s: %s, want fenced", w, rep.Results[w])
		}
	}
	if rep.Results["untouched"] != "ok" {
		t.Errorf("the resumed holder's write to an item its successor never wrote: %s, want ok", rep.Results["untouched"])
	}
	if !rep.Lost {
		t.Error("Lost had not fired when the paused holder resumed past its lease")
	}
	for id, want := range map[string]string{"touched": "successor", "successor": "successor", "untouched": "zombie-late"} {
		r, err := data.ReadItem(ctx, pk, id, nil)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var doc struct{ Value string }
		_ = json.Unmarshal(r.Value, &doc)
		if doc.Value != want {
			t.Errorf("%s = %q, want %q", id, doc.Value, want)
		}
	}
	h.Release(ctx)
}
