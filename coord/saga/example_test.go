package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/saga"
)

// The purchase of the talk: hold the seat, charge the card, issue the
// ticket, send the confirmation. The payment provider declines the card,
// so the seat is released again (the charge's own compensation runs too,
// and finds nothing to refund).
func Example() {
	ctx := context.Background()
	cred, _ := azcosmos.NewKeyCredential(key)
	client, _ := azcosmos.NewClientWithKey(endpoint, cred, nil)
	_, _ = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "tickets"}, nil)
	db, _ := client.NewDatabase("tickets")
	sagas, err := saga.CreateContainer(ctx, db, "sagas")
	if err != nil {
		panic(err)
	}
	locks, err := lock.CreateContainer(ctx, db, "locks")
	if err != nil {
		panic(err)
	}

	type order struct{ Seat, Card string }
	seat := func(c saga.Call) string {
		var o order
		_ = json.Unmarshal(c.Input, &o)
		return o.Seat
	}
	// Each participant call carries c.Key (saga id + step): the service
	// applies a key at most once.
	steps := []saga.Step{
		{Name: "hold_seat",
			Action:     func(ctx context.Context, c saga.Call) error { fmt.Println("hold seat", seat(c)); return nil },
			Compensate: func(ctx context.Context, c saga.Call) error { fmt.Println("release seat", seat(c)); return nil }},
		{Name: "charge",
			Action:     func(ctx context.Context, c saga.Call) error { return errors.New("card declined") },
			Compensate: func(ctx context.Context, c saga.Call) error { fmt.Println("refund: nothing charged"); return nil }},
		{Name: "issue_ticket",
			Action:     func(ctx context.Context, c saga.Call) error { fmt.Println("issue ticket"); return nil },
			Compensate: func(ctx context.Context, c saga.Call) error { fmt.Println("revoke ticket"); return nil }},
		{Name: "notify",
			Action: func(ctx context.Context, c saga.Call) error { fmt.Println("send confirmation"); return nil }},
	}
	ex, err := saga.New(sagas, "purchase", steps, saga.Options{Locks: lock.New(locks)})
	if err != nil {
		panic(err)
	}
	st, err := ex.Start(ctx, saga.NewID(), order{Seat: "floor-R3-S7", Card: "4242"})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Status, "after", st.FailedStep+":", st.Error)
	// Output:
	// hold seat floor-R3-S7
	// refund: nothing charged
	// release seat floor-R3-S7
	// compensated after charge: card declined
}
