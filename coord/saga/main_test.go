package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/saga"
)

var server *cosmostest.Server

// endpoint and key are what the examples connect to.
var endpoint, key string

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorker())
	}
	s, stop, err := cosmostest.StartForMain()
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord/saga: skipping, no server: %v\n", err)
		os.Exit(0)
	}
	server, endpoint, key = s, s.Endpoint, s.Key
	code := m.Run()
	stop()
	os.Exit(code)
}

var dbSeq atomic.Int64

// env is one test's database: saga, lock and ledger containers, through
// one client.
type env struct {
	client *azcosmos.Client
	sagas  *azcosmos.ContainerClient
	locks  *lock.Locker
	ledger *azcosmos.ContainerClient
}

func newDB(t testing.TB) string {
	t.Helper()
	c, err := server.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), dbSeq.Add(1))
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: name}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase(name)
	if _, err := saga.CreateContainer(ctx, d, "sagas"); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.CreateContainer(ctx, d, "locks"); err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "ledger", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// open returns the containers of database db through a new client with the
// given per-try policies.
func open(t testing.TB, db string, policies ...policy.Policy) env {
	t.Helper()
	c, err := server.NewClient(&azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{PerRetryPolicies: policies}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase(db)
	s, _ := d.NewContainer("sagas")
	l, _ := d.NewContainer("locks")
	g, _ := d.NewContainer("ledger")
	return env{client: c, sagas: s, locks: lock.New(l), ledger: g}
}

// cutoff is a per-try policy that, once cut, holds every request of its
// client until restored: the executor behind it is as good as crashed for
// the database (its lease expires), yet its goroutine can be woken later
// to act as a zombie.
type cutoff struct {
	mu  sync.Mutex
	cut chan struct{}
}

func (c *cutoff) Do(req *policy.Request) (*http.Response, error) {
	c.mu.Lock()
	ch := c.cut
	c.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-req.Raw().Context().Done():
			return nil, req.Raw().Context().Err()
		}
	}
	return req.Next()
}

func (c *cutoff) sever() {
	c.mu.Lock()
	if c.cut == nil {
		c.cut = make(chan struct{})
	}
	c.mu.Unlock()
}

func (c *cutoff) restore() {
	c.mu.Lock()
	if c.cut != nil {
		close(c.cut)
		c.cut = nil
	}
	c.mu.Unlock()
}

// The participants of the purchase saga are services with idempotent
// endpoints: each records, per idempotency key, a document in the ledger
// (partition: the saga's id) whose creation and the service's effect
// counter change in one transactional batch. A compensation turns the
// key's document to "cancelled" (creating it as a tombstone if the action
// never arrived, so a late action is refused) and appends the service to
// the partition's undo log in the same batch.
var services = []string{"seats", "payments", "tickets", "mail"}

var errCancelled = errors.New("participant: this key was cancelled")

type keyDoc struct {
	ID    string `json:"id"`
	PK    string `json:"pk"`
	State string `json:"state"`
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func newLedger(ctx context.Context, g *azcosmos.ContainerClient, pk string) error {
	b, _ := json.Marshal(map[string]any{"id": "effects", "pk": pk, "seats": 0, "payments": 0, "tickets": 0, "mail": 0, "undo": []string{}})
	_, err := g.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), b, nil)
	return err
}

func apply(ctx context.Context, g *azcosmos.ContainerClient, pk, svc, key string) error {
	p := azcosmos.NewPartitionKeyString(pk)
	for {
		b := g.NewTransactionalBatch(p)
		d, _ := json.Marshal(keyDoc{ID: svc + "." + key, PK: pk, State: "applied"})
		b.CreateItem(d, nil)
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/"+svc, 1)
		b.PatchItem("effects", ops, nil)
		r, err := g.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil {
			return err
		}
		if r.Success {
			return nil
		}
		if r.OperationResults[0].StatusCode != http.StatusConflict {
			return fmt.Errorf("participant %s: batch status %d", svc, r.OperationResults[0].StatusCode)
		}
		cur, err := g.ReadItem(ctx, p, svc+"."+key, nil)
		if statusOf(err) == http.StatusNotFound {
			continue
		}
		if err != nil {
			return err
		}
		var k keyDoc
		json.Unmarshal(cur.Value, &k)
		if k.State == "cancelled" {
			return errCancelled
		}
		return nil // applied before: idempotent
	}
}

func cancel(ctx context.Context, g *azcosmos.ContainerClient, pk, svc, key string) error {
	p := azcosmos.NewPartitionKeyString(pk)
	for {
		cur, err := g.ReadItem(ctx, p, svc+"."+key, nil)
		if statusOf(err) == http.StatusNotFound {
			d, _ := json.Marshal(keyDoc{ID: svc + "." + key, PK: pk, State: "cancelled"})
			_, err := g.CreateItem(ctx, p, d, nil)
			if statusOf(err) == http.StatusConflict {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		var k keyDoc
		json.Unmarshal(cur.Value, &k)
		if k.State == "cancelled" {
			return nil
		}
		b := g.NewTransactionalBatch(p)
		d, _ := json.Marshal(keyDoc{ID: svc + "." + key, PK: pk, State: "cancelled"})
		etag := cur.ETag
		b.ReplaceItem(svc+"."+key, d, &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &etag})
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/"+svc, -1)
		ops.AppendAdd("/undo/-", svc)
		b.PatchItem("effects", ops, nil)
		r, err := g.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil {
			return err
		}
		if r.Success {
			return nil
		}
		// The key document changed under us: look again.
	}
}

type effects struct {
	Seats, Payments, Tickets, Mail int
	Undo                           []string
}

func readEffects(ctx context.Context, g *azcosmos.ContainerClient, pk string) (effects, error) {
	r, err := g.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), "effects", nil)
	if err != nil {
		return effects{}, err
	}
	var e effects
	err = json.Unmarshal(r.Value, &e)
	return e, err
}
