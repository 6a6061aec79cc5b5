package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/lock"
)

// exampleDB opens (creating it if need be) a database of the example
// server: endpoint and key come from TestMain here, from configuration in
// a service.
func exampleDB(ctx context.Context, name string) *azcosmos.DatabaseClient {
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		panic(err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, nil)
	if err != nil {
		panic(err)
	}
	_, _ = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: name}, nil)
	db, err := client.NewDatabase(name)
	if err != nil {
		panic(err)
	}
	return db
}

// A short critical section: choosing the best available seats of a
// concert, so two buyers never pick the same ones.
func Example() {
	ctx := context.Background()
	locks, err := lock.CreateContainer(ctx, exampleDB(ctx, "tickets"), "locks")
	if err != nil {
		panic(err)
	}
	l := lock.New(locks)

	h, err := l.Acquire(ctx, "concert-42.best-available", &lock.Options{TTL: 10 * time.Second, Owner: "alice"})
	if err != nil {
		panic(err)
	}
	// Bob does not wait: TryAcquire tells him the seats are being chosen.
	_, err = l.TryAcquire(ctx, "concert-42.best-available", &lock.Options{Owner: "bob"})
	fmt.Println("bob:", errors.Is(err, lock.ErrHeld))

	// ... pick the seats, writing them with lock.FencedPatch(..., h.Fence(), ...);
	// stop at once if h.Lost() fires ...
	first := h.Token()
	if err := h.Release(ctx); err != nil {
		panic(err)
	}

	h, err = l.Acquire(ctx, "concert-42.best-available", &lock.Options{Owner: "bob"})
	if err != nil {
		panic(err)
	}
	defer h.Release(ctx)
	fmt.Println("bob's token is newer:", h.Token() > first)
	// Output:
	// bob: true
	// bob's token is newer: true
}

// The protected resource keeps the highest fencing token it has accepted
// and refuses writes from a holder whose lock has since passed to another.
func ExampleFencedPatch() {
	ctx := context.Background()
	db := exampleDB(ctx, "tickets")
	_, _ = db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "seatmaps",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/concert"}}}, nil)
	seats, _ := db.NewContainer("seatmaps")
	pk := azcosmos.NewPartitionKeyString("concert-43")
	_, _ = seats.UpsertItem(ctx, pk, []byte(`{"id":"floor","concert":"concert-43","held":[]}`), nil)

	// A newer holder (token 8) wrote first; a zombie holding token 7 wakes up.
	var ops azcosmos.PatchOperations
	ops.AppendAdd("/held/-", "F-5")
	if _, err := lock.FencedPatch(ctx, seats, pk, "floor", lock.Fence{Name: "concert-43.seats", Token: 8}, ops); err != nil {
		panic(err)
	}
	var late azcosmos.PatchOperations
	late.AppendAdd("/held/-", "F-5")
	_, err := lock.FencedPatch(ctx, seats, pk, "floor", lock.Fence{Name: "concert-43.seats", Token: 7}, late)
	fmt.Println("zombie fenced out:", errors.Is(err, lock.ErrFenced))
	// Output:
	// zombie fenced out: true
}
