package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// Two orrery processes on one PostgreSQL database act as one: what one
// creates the other serves at once, and a create of one id raced on both
// succeeds once.
func TestTwoServersOnOnePostgresDatabaseActAsOne(t *testing.T) {
	needPostgres(t)
	url := pgtest.URL(t)
	bin := buildBinary(t)
	a := startChild(t, bin, "--postgres", url, "--postgres-pool", "4")
	defer a.kill()
	b := startChildEnv(t, bin, []string{"ORRERY_POSTGRES=" + url})
	defer b.kill()
	ctx := context.Background()
	ca, cb := newClient(t, a.endpoint), newClient(t, b.endpoint)
	if _, err := ca.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	dba, _ := ca.NewDatabase("db")
	if _, err := dba.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	contA, _ := ca.NewContainer("db", "c")
	contB, _ := cb.NewContainer("db", "c")
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := contB.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"p","v":1}`), nil); err != nil {
		t.Fatalf("create on B in a container made on A: %v", err)
	}
	if _, err := contA.ReadItem(ctx, pk, "1", nil); err != nil {
		t.Fatalf("read on A of an item made on B: %v", err)
	}
	for i := range 10 {
		id := string(rune('a' + i))
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for j, c := range []*azcosmos.ContainerClient{contA, contB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.CreateItem(ctx, pk, []byte(`{"id":"`+id+`","pk":"p"}`), nil)
				statuses[j] = http.StatusCreated
				var re *azcore.ResponseError
				if errors.As(err, &re) {
					statuses[j] = re.StatusCode
				} else if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if !(statuses[0] == 201 && statuses[1] == 409 || statuses[0] == 409 && statuses[1] == 201) {
			t.Fatalf("id %s created on both servers at once: %v, want one 201 and one 409", id, statuses)
		}
	}
}
