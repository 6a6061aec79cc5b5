package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
)

var server *cosmostest.Server

func TestMain(m *testing.M) {
	os.Exit(cosmostest.RunMain(m, func(s *cosmostest.Server) { server = s }))
}

// ledger creates a container partitioned by /account with a balance
// document in account "a".
func ledger(t testing.TB, c *azcosmos.Client) *azcosmos.ContainerClient {
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "bank"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("bank")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "ledger",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/account"}}}, nil); err != nil {
		t.Fatal(err)
	}
	l, _ := db.NewContainer("ledger")
	b, _ := json.Marshal(map[string]any{"id": "balance", "account": "a", "cents": 0})
	if _, err := l.CreateItem(ctx, azcosmos.NewPartitionKeyString("a"), b, nil); err != nil {
		t.Fatal(err)
	}
	return l
}

func credit(cents int) func(context.Context, *azcosmos.TransactionalBatch) error {
	return func(_ context.Context, b *azcosmos.TransactionalBatch) error {
		ops := azcosmos.PatchOperations{}
		ops.AppendIncrement("/cents", int64(cents))
		b.PatchItem("balance", ops, nil)
		return nil
	}
}

func balance(t testing.TB, l *azcosmos.ContainerClient) int {
	r, err := l.ReadItem(context.Background(), azcosmos.NewPartitionKeyString("a"), "balance", nil)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Cents int }
	_ = json.Unmarshal(r.Value, &d)
	return d.Cents
}

func TestHandleTakesEffectOncePerMessageUnderConcurrentRedelivery(t *testing.T) {
	l := ledger(t, cosmostest.Start(t).Client(t))
	in := mustInbox(l, "payments")
	var ran atomic.Int32
	var wg sync.WaitGroup
	// Eight deliveries of each of five messages, all at once.
	for m := range 5 {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := in.Handle(context.Background(), "a", fmt.Sprintf("m%d", m), credit(100))
				if err != nil {
					t.Error(err)
				}
				if ok {
					ran.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if ran.Load() != 5 || balance(t, l) != 500 {
		t.Fatalf("%d handled, balance %d; want 5 and 500", ran.Load(), balance(t, l))
	}
}

func TestHandleWritesNothingWhenTheEffectFails(t *testing.T) {
	l := ledger(t, cosmostest.Start(t).Client(t))
	in := mustInbox(l, "payments")
	// The effect replaces a document that does not exist: the batch fails,
	// and the marker must not be left behind.
	_, err := in.Handle(context.Background(), "a", "m1", func(_ context.Context, b *azcosmos.TransactionalBatch) error {
		doc, _ := json.Marshal(map[string]any{"id": "missing", "account": "a"})
		b.ReplaceItem("missing", doc, nil)
		return nil
	})
	var be *coord.BatchError
	if !errors.As(err, &be) || be.Index != 1 || be.StatusCode != http.StatusNotFound {
		t.Fatalf("a failing effect: %v, want a *coord.BatchError for operation 1 (404)", err)
	}
	if done, err := in.Handled(context.Background(), "a", "m1"); err != nil || done {
		t.Fatalf("marker after a failed batch: %v, %v", done, err)
	}
	// The redelivery then takes effect.
	if ok, err := in.Handle(context.Background(), "a", "m1", credit(7)); err != nil || !ok || balance(t, l) != 7 {
		t.Fatalf("redelivery: %v, %v, balance %d", ok, err, balance(t, l))
	}
}

func TestHandleExternalSkipsHandledMessages(t *testing.T) {
	l := ledger(t, cosmostest.Start(t).Client(t))
	in := mustInbox(l, "mailer")
	sent := 0
	send := func(context.Context) error { sent++; return nil }
	for range 3 {
		if _, err := in.HandleExternal(context.Background(), "a", "welcome-a", send); err != nil {
			t.Fatal(err)
		}
	}
	if sent != 1 {
		t.Fatalf("external effect ran %d times, want 1", sent)
	}
}

func ExampleInbox_Handle() {
	ctx := context.Background()
	c, _ := azcosmos.NewClientWithKey(server.Endpoint, mustKey(), nil)
	l := ledger(exampleTB{}, c)
	in := mustInbox(l, "payments")
	// The same message delivered three times credits the account once.
	for range 3 {
		ran, err := in.Handle(ctx, "a", "payment-42", credit(250))
		fmt.Println(ran, err)
	}
	fmt.Println("balance:", balance(exampleTB{}, l))
	// Output:
	// true <nil>
	// false <nil>
	// false <nil>
	// balance: 250
}

func mustKey() azcosmos.KeyCredential {
	k, err := azcosmos.NewKeyCredential(server.Key)
	if err != nil {
		panic(err)
	}
	return k
}

// exampleTB lets the examples use the tests' helpers: a failure panics.
type exampleTB struct{ testing.TB }

func (exampleTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func mustInbox(c *azcosmos.ContainerClient, consumer string) *inbox.Inbox {
	in, err := inbox.New(context.Background(), c, consumer, nil)
	if err != nil {
		panic(err)
	}
	return in
}

// New reads the container's partition key definition and refuses one whose
// partition key is a property of the markers themselves.
func TestNewRefusesAContainerItCannotMarkIn(t *testing.T) {
	c := cosmostest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "refusals"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("refusals")
	for _, path := range []string{"/id", "/consumer"} {
		id := "by" + path[1:]
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{path}}}, nil); err != nil {
			t.Fatal(err)
		}
		cc, _ := db.NewContainer(id)
		if _, err := inbox.New(ctx, cc, "billing", nil); err == nil {
			t.Errorf("an inbox in a container partitioned by %s: no error", path)
		}
	}
	if _, err := inbox.New(ctx, ledger(t, c), "", nil); err == nil {
		t.Error("an inbox without a consumer name: no error")
	}
}
