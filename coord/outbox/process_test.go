package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/outbox"
)

// workerEnv makes this test binary, re-executed, run one relay (TestMain).
const workerEnv = "COORD_OUTBOX_WORKER"

// runRelayWorker is a relay of the orders of the database COORD_OUTBOX_DB to a webhook, giving up
// on a message after four failed publications (dead letters and a hook
// that tells the webhook's server).
func runRelayWorker() int {
	s := &cosmostest.Server{Endpoint: os.Getenv("COORD_TEST_ENDPOINT"), Key: os.Getenv("COORD_TEST_KEY")}
	client, err := s.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dbName := os.Getenv("COORD_OUTBOX_DB")
	orders, _ := client.NewContainer(dbName, "orders")
	leases, _ := client.NewContainer(dbName, "leases")
	dead, _ := client.NewContainer(dbName, "dead-letters")
	hook := os.Getenv("COORD_OUTBOX_HOOK")
	r, err := outbox.NewRelay(client, orders, leases, &outbox.WebhookPublisher{URL: hook + "/publish"}, &outbox.RelayOptions{
		RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: 4, DeadLetters: dead,
		OnDeadLetter: func(ctx context.Context, d outbox.DeadLetter) error {
			return (&outbox.WebhookPublisher{URL: hook + "/dead"}).Publish(ctx, d.Message)
		},
		Processor: &changefeed.Options{Instance: os.Getenv("COORD_OUTBOX_INSTANCE"), PollInterval: 50 * time.Millisecond,
			AcquireInterval: 100 * time.Millisecond, RenewInterval: 300 * time.Millisecond, Expiration: 2 * time.Second},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("RUNNING")
	_ = r.Run(context.Background())
	return 0
}

// webhook is the consumer's endpoint: it refuses the first offer of every
// third message (and every offer of the poison one), and records each
// message it accepts. (A failure pattern by call count rather than by
// message could refuse one message MaxAttempts times in a row.)
type webhook struct {
	poison string
	mu     sync.Mutex
	calls  int
	tries  map[string]int
	got    []outbox.Message // accepted, duplicates included
	dead   []string         // dead-letter hook calls
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m outbox.Message
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.URL.Path == "/dead" {
		h.dead = append(h.dead, m.ID)
		return
	}
	h.calls++
	if m.ID == h.poison {
		http.Error(w, "this message is malformed", http.StatusInternalServerError)
		return
	}
	h.tries[m.ID]++
	var seq int
	fmt.Sscanf(m.ID, "order-%d", &seq)
	if seq%3 == 0 && h.tries[m.ID] == 1 {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	h.got = append(h.got, m)
}

func startRelayProcess(t *testing.T, db, hook, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), server.Env()...), workerEnv+"=1", "COORD_OUTBOX_DB="+db,
		"COORD_OUTBOX_HOOK="+hook, "COORD_OUTBOX_INSTANCE="+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "RUNNING") {
		t.Fatalf("relay %s said %q (%v)", name, line, err)
	}
	return cmd
}

// TestRelayProcessesKilledWithAPoisonMessage runs two relay processes on a
// flaky webhook (a third of the messages refused on first offer) while
// orders are placed, kills one with SIGKILL three
// times (starting another each time), with one message the webhook always
// refuses: every other message reaches the webhook, each customer's for
// the first time in the order placed; the refused one is dead-lettered
// once (one document, whatever the kills), the hook told of it, and its
// customer's later messages delivered after it.
func TestRelayProcessesKilledWithAPoisonMessage(t *testing.T) {
	ctx := context.Background()
	c, err := server.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	dbName := fmt.Sprintf("relay-%d", time.Now().UnixNano())
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: dbName}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase(dbName)
	for id, pk := range map[string]string{"orders": "/customer", "leases": "/id"} {
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := outbox.CreateDeadLetterContainer(ctx, db, "dead-letters")
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := db.NewContainer("orders")
	box, err := outbox.New(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	const total, customers = 200, 8
	cust := func(i int) string { return fmt.Sprintf("c%d", i%customers) }
	poison := "order-0042"
	h := &webhook{poison: poison, tries: map[string]int{}}
	hook := httptest.NewServer(h)
	defer hook.Close()

	placed := make(chan error, 1)
	go func() {
		for i := range total {
			b := orders.NewTransactionalBatch(azcosmos.NewPartitionKeyString(cust(i)))
			id := fmt.Sprintf("order-%04d", i)
			b.CreateItem([]byte(fmt.Sprintf(`{"id":%q,"customer":%q,"seq":%d}`, id, cust(i), i)), nil)
			payload, _ := json.Marshal(map[string]int{"seq": i})
			if err := box.Add(&b, cust(i), outbox.Message{ID: id, Topic: "order-placed", Payload: payload}); err != nil {
				placed <- err
				return
			}
			if err := coord.Committed(orders.ExecuteTransactionalBatch(ctx, b, nil)); err != nil {
				placed <- err
				return
			}
			time.Sleep(15 * time.Millisecond)
		}
		placed <- nil
	}()

	relays := []*exec.Cmd{startRelayProcess(t, dbName, hook.URL, "r0"), startRelayProcess(t, dbName, hook.URL, "r1")}
	for kill := range 3 {
		time.Sleep(time.Second)
		victim := relays[kill%2]
		if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = victim.Wait()
		relays[kill%2] = startRelayProcess(t, dbName, hook.URL, fmt.Sprintf("r%d", kill+2))
	}
	if err := <-placed; err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(90 * time.Second)
	for {
		h.mu.Lock()
		seen := map[string]bool{}
		for _, m := range h.got {
			seen[m.ID] = true
		}
		dl := len(h.dead)
		h.mu.Unlock()
		if len(seen) == total-1 && dl > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages delivered, %d dead-letter hook calls", len(seen), total-1, dl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	first := map[string]bool{}
	last := map[string]int{}
	dups := 0
	for _, m := range h.got {
		if first[m.ID] {
			dups++
			continue
		}
		first[m.ID] = true
		var p struct{ Seq int }
		_ = json.Unmarshal(m.Payload, &p)
		if l, ok := last[m.Key()]; ok && p.Seq < l {
			t.Errorf("customer %s: order %d delivered for the first time after %d", m.Key(), p.Seq, l)
		}
		last[m.Key()] = p.Seq
	}
	if first[poison] {
		t.Fatalf("the poison message was accepted")
	}
	for _, id := range h.dead {
		if id != poison {
			t.Fatalf("the dead-letter hook was told of %s", id)
		}
	}
	var ids []string
	pager := dead.NewQueryItemsPager("SELECT c.id, c.attempts FROM c", azcosmos.NewPartitionKey(), nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var d struct {
				ID       string
				Attempts int
			}
			_ = json.Unmarshal(it, &d)
			ids = append(ids, d.ID)
			if d.Attempts != 4 {
				t.Errorf("dead letter %s after %d attempts, want 4", d.ID, d.Attempts)
			}
		}
	}
	if len(ids) != 1 || ids[0] != poison {
		t.Fatalf("dead letters %v, want only %s", ids, poison)
	}
	t.Logf("%d webhook calls, %d duplicate deliveries, %d dead-letter hook calls", h.calls, dups, len(h.dead))
}
