package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	// applies a key at most once. An action's output is recorded with its
	// completion and handed to later steps and to compensations.
	steps := []saga.Step{
		{Name: "hold_seat",
			Action: func(ctx context.Context, c saga.Call) (any, error) {
				fmt.Println("hold seat", seat(c))
				return map[string]string{"hold": "H-" + seat(c)}, nil
			},
			Compensate: func(ctx context.Context, c saga.Call) error {
				var held map[string]string
				_, _ = c.Output("hold_seat", &held)
				fmt.Println("release hold", held["hold"])
				return nil
			}},
		{Name: "charge",
			// A declined card is not worth retrying: Permanent.
			Action: func(ctx context.Context, c saga.Call) (any, error) {
				return nil, saga.Permanent(errors.New("card declined"))
			},
			Compensate: func(ctx context.Context, c saga.Call) error {
				if !c.Completed {
					fmt.Println("refund: nothing was charged")
					return nil
				}
				var charge map[string]string
				_, _ = c.Output("charge", &charge)
				fmt.Println("refund", charge["id"])
				return nil
			},
			Retry:   saga.RetryPolicy{Attempts: 5}, // transient failures of the provider
			Timeout: 10 * time.Second},             // per attempt
		{Name: "issue_ticket",
			Action: func(ctx context.Context, c saga.Call) (any, error) {
				fmt.Println("issue ticket")
				return nil, nil
			},
			Compensate: func(ctx context.Context, c saga.Call) error { fmt.Println("revoke ticket"); return nil }},
		{Name: "notify",
			Action: func(ctx context.Context, c saga.Call) (any, error) {
				fmt.Println("send confirmation")
				return nil, nil
			}},
	}
	ex, err := saga.New(sagas, "purchase", steps, lock.New(locks), nil)
	if err != nil {
		panic(err)
	}
	st, err := ex.Start(ctx, saga.NewID(), order{Seat: "floor-R3-S7", Card: "4242"})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Status, "after", st.FailedStep+":", st.Error, "after", st.Attempts, "attempt")
	// Output:
	// hold seat floor-R3-S7
	// refund: nothing was charged
	// release hold H-floor-R3-S7
	// compensated after charge: card declined after 1 attempt
}
