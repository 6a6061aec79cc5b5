package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// What every test of orrery serve on PostgreSQL starts its gateways
// with: child processes of the built binary, a Go SDK client each.

// needPostgres skips t in -short runs and where PostgreSQL cannot be used
// (pgtest.Skip fails it instead when ORRERY_REQUIRE_POSTGRES=1).
func needPostgres(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PostgreSQL servers and gateways as child processes")
	}
	if err := pgtest.Available(); err != nil {
		pgtest.Skip(t, err)
	}
}

// pgFleet is a set of orrery gateways on one PostgreSQL database, each
// with a Go SDK client that never retries (an error means "not
// acknowledged").
type pgFleet struct {
	gateways []*child
	conts    []*azcosmos.ContainerClient
	clients  []*azcosmos.Client
}

func startFleet(t testing.TB, url string, n int) *pgFleet {
	t.Helper()
	return startGateways(t, n, "--postgres", url, "--postgres-pool", "8")
}

// startGateways starts n gateways with args and creates the container
// db/c (partition key /pk) through the first.
func startGateways(t testing.TB, n int, args ...string) *pgFleet {
	t.Helper()
	bin := buildBinary(t)
	f := &pgFleet{}
	for range n {
		c := startChild(t, bin, args...)
		t.Cleanup(c.kill)
		f.gateways = append(f.gateways, c)
		f.clients = append(f.clients, newClient(t, c.endpoint))
	}
	ctx := context.Background()
	if _, err := f.clients[0].CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := f.clients[0].NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.clients {
		cont, _ := c.NewContainer("db", "c")
		f.conts = append(f.conts, cont)
	}
	return f
}

// alive reports whether gateway i's process is still running.
func (f *pgFleet) alive(i int) bool {
	return f.gateways[i].cmd.ProcessState == nil && f.gateways[i].cmd.Process.Signal(syscall.Signal(0)) == nil
}

// ackLog records acknowledged writes: item id → the value acknowledged.
type ackLog struct {
	mu    sync.Mutex
	acked map[string]int
}

func (a *ackLog) add(id string, v int) {
	a.mu.Lock()
	a.acked[id] = v
	a.mu.Unlock()
}

func (a *ackLog) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// checkAll reads every acknowledged item through cont and fails t for any
// that is missing or holds another value.
func (a *ackLog) checkAll(t *testing.T, name string, cont *azcosmos.ContainerClient) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := context.Background()
	missing := 0
	for id, v := range a.acked {
		resp, err := cont.ReadItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), id, nil)
		if err != nil {
			missing++
			if missing <= 5 {
				t.Errorf("%s: acknowledged item %s (v=%d): %v", name, id, v, err)
			}
			continue
		}
		var doc struct {
			V int `json:"v"`
		}
		if err := json.Unmarshal(resp.Value, &doc); err != nil || doc.V != v {
			t.Errorf("%s: item %s holds %s, acknowledged v=%d", name, id, resp.Value, v)
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d acknowledged writes missing", name, missing, len(a.acked))
	}
}

// pkOf spreads items over a few logical partitions.
func pkOf(id string) string { return fmt.Sprintf("p%d", len(id)%3) }
