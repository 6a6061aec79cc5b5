package changefeed_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
)

// workerEnv makes this test binary, re-executed, run one processor
// instance (TestMain).
const workerEnv = "COORD_CHANGEFEED_WORKER"

// runWorker is one instance of the processor "proc" over the orders of the
// database COORD_CHANGEFEED_DB with
// manual checkpoints: its handler only queues each batch, and a slow sink
// copies the queued changes into its sink, then checkpoints the batch. So the
// lease's position trails what was read, and a kill loses what was read and
// not yet copied, unless the lease did not advance past it. Lease
// notifications are printed on standard output.
func runWorker() int {
	s := &cosmostest.Server{Endpoint: os.Getenv("COORD_TEST_ENDPOINT"), Key: os.Getenv("COORD_TEST_KEY")}
	client, err := s.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dbName := os.Getenv("COORD_CHANGEFEED_DB")
	orders, _ := client.NewContainer(dbName, "orders")
	leases, _ := client.NewContainer(dbName, "leases")
	sink, _ := client.NewContainer(dbName, "sink")
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	queue := make(chan changefeed.Batch, 10000)
	p, err := changefeed.New(client, orders, leases, "proc", func(ctx context.Context, b changefeed.Batch) error {
		queue <- b
		return nil
	}, &changefeed.Options{
		Instance: os.Getenv("COORD_CHANGEFEED_INSTANCE"), ManualCheckpoint: true, MaxItems: 10,
		PollInterval: 50 * time.Millisecond, AcquireInterval: 200 * time.Millisecond,
		RenewInterval: 300 * time.Millisecond, Expiration: 3 * time.Second,
		OnLeaseAcquired: func(lease string) { say("ACQUIRED %s", lease) },
		OnLeaseReleased: func(lease string) { say("RELEASED %s", lease) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	go func() {
		for b := range queue {
			time.Sleep(20 * time.Millisecond) // a slow sink
			for _, raw := range b.Changes {
				var c struct {
					ID string `json:"id"`
					PK string `json:"pk"`
				}
				_ = json.Unmarshal(raw, &c)
				for {
					_, err := sink.UpsertItem(ctx, azcosmos.NewPartitionKeyString(c.PK), raw, nil)
					if err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			if err := b.Checkpoint(ctx); err != nil && !errors.Is(err, changefeed.ErrLeaseLost) {
				fmt.Fprintln(os.Stderr, "checkpoint:", err)
			}
		}
	}()
	say("RUNNING")
	_ = p.Run(ctx)
	return 0
}

// instance is a worker process and the lease notifications it printed.
type instance struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	held map[string]bool
	ever map[string]bool // leases it was ever told it acquired
}

func startInstance(t *testing.T, db, name string) *instance {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), server.Env()...), workerEnv+"=1", "COORD_CHANGEFEED_DB="+db, "COORD_CHANGEFEED_INSTANCE="+name)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{name: name, cmd: cmd, held: map[string]bool{}, ever: map[string]bool{}}
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			in.mu.Lock()
			switch {
			case len(f) == 1 && f[0] == "RUNNING":
				close(running)
			case len(f) == 2 && f[0] == "ACQUIRED":
				in.held[f[1]], in.ever[f[1]] = true, true
			case len(f) == 2 && f[0] == "RELEASED":
				delete(in.held, f[1])
			}
			in.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	select {
	case <-running:
	case <-time.After(60 * time.Second):
		t.Fatalf("instance %s did not start", name)
	}
	return in
}

func (in *instance) holding() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for l := range in.held {
		out = append(out, l)
	}
	return out
}

func (in *instance) acquired(lease string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.ever[lease]
}

func (in *instance) kill(t *testing.T) []string {
	t.Helper()
	held := in.holding()
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = in.cmd.Wait()
	return held
}

// TestManualCheckpointsSurviveKills runs the processor with manual
// checkpoints in worker processes whose sink trails what they read, and
// kills them with SIGKILL while writers keep writing: every change reaches
// the sink (nothing the killed ones had read but not copied is lost, so the
// lease never advanced past what was checkpointed), and the leases a killed
// instance held are taken up by the others, which say so in their
// lease-acquired notifications.
func TestManualCheckpointsSurviveKills(t *testing.T) {
	ctx := context.Background()
	c, err := server.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	dbName := fmt.Sprintf("kills-%d", time.Now().UnixNano())
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: dbName}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase(dbName)
	tp := azcosmos.NewManualThroughputProperties(40000)
	for id, pk := range map[string]string{"orders": "/pk", "leases": "/id", "sink": "/pk"} {
		var o *azcosmos.CreateContainerOptions
		if id == "orders" {
			o = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
		}
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}}}, o); err != nil {
			t.Fatal(err)
		}
	}
	orders, _ := db.NewContainer("orders")
	sink, _ := db.NewContainer("sink")

	const keys, perKey = 16, 60
	writes := make(chan error, 1)
	go func() {
		for s := range perKey {
			for k := range keys {
				pk := fmt.Sprintf("pk%02d", k)
				doc := fmt.Sprintf(`{"id":"%s-%04d","pk":%q,"seq":%d}`, pk, s, pk, s)
				if _, err := orders.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(doc), nil); err != nil {
					writes <- err
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		writes <- nil
	}()

	a := startInstance(t, dbName, "a")
	b := startInstance(t, dbName, "b")
	time.Sleep(1500 * time.Millisecond)
	heldByA := a.kill(t)
	t.Logf("killed a holding %v", heldByA)
	a2 := startInstance(t, dbName, "a2")
	time.Sleep(1500 * time.Millisecond)
	heldByB := b.kill(t)
	t.Logf("killed b holding %v", heldByB)
	if err := <-writes; err != nil {
		t.Fatal(err)
	}
	b2 := startInstance(t, dbName, "b2")

	total := keys * perKey
	deadline := time.Now().Add(90 * time.Second)
	for {
		n, err := count(ctx, sink)
		if err != nil {
			t.Fatal(err)
		}
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d changes reached the sink", n, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The killed instances' leases were taken up, and the notifications
	// said so.
	for _, l := range append(heldByA, heldByB...) {
		if !a2.acquired(l) && !b2.acquired(l) && !b.acquired(l) {
			t.Errorf("lease %s of a killed instance was never acquired by another (a2 %v, b2 %v)", l, a2.holding(), b2.holding())
		}
	}
	if len(heldByA) == 0 || len(heldByB) == 0 {
		t.Errorf("the killed instances held no leases (a %v, b %v): the kills proved nothing", heldByA, heldByB)
	}
}

// count is the number of documents in c, whose partition keys are pk00 to
// pk15: counted one partition key at a time, as the Go SDK runs no
// cross-partition aggregate.
func count(ctx context.Context, c *azcosmos.ContainerClient) (int, error) {
	n := 0
	for k := range 16 {
		pager := c.NewQueryItemsPager("SELECT VALUE COUNT(1) FROM c", azcosmos.NewPartitionKeyString(fmt.Sprintf("pk%02d", k)), nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return 0, err
			}
			for _, it := range page.Items {
				var v int
				if err := json.Unmarshal(it, &v); err != nil {
					return 0, err
				}
				n += v
			}
		}
	}
	return n, nil
}
