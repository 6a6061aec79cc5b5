package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/outbox"
)

func Example() {
	cred, _ := azcosmos.NewKeyCredential(server.Key)
	client, _ := azcosmos.NewClientWithKey(server.Endpoint, cred, nil)
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "example-outbox"}, nil); err != nil {
		panic(err)
	}
	db, _ := client.NewDatabase("example-outbox")
	for id, pk := range map[string]string{"orders": "/customer", "leases": "/id"} {
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}}}, nil); err != nil {
			panic(err)
		}
	}
	orders, _ := db.NewContainer("orders")
	leases, _ := db.NewContainer("leases")

	// The order and its "order placed" message commit together, or neither.
	box, err := outbox.New(ctx, orders)
	if err != nil {
		panic(err)
	}
	b := orders.NewTransactionalBatch(azcosmos.NewPartitionKeyString("alice"))
	order, _ := json.Marshal(map[string]any{"id": "order-1", "customer": "alice", "total": 42})
	b.CreateItem(order, nil)
	_ = box.Add(&b, "alice", outbox.Message{ID: "order-1-placed", Topic: "order-placed", Payload: order})
	if err := coord.Committed(orders.ExecuteTransactionalBatch(ctx, b, nil)); err != nil {
		panic(err)
	}

	// The relay publishes it (here to memory; WebhookPublisher POSTs it).
	pub := outbox.NewMemoryPublisher()
	relay, err := outbox.NewRelay(client, orders, leases, pub, &outbox.RelayOptions{
		Processor: &changefeed.Options{PollInterval: 100 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = relay.Run(runCtx); close(done) }()
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pub.Wait(waitCtx, 1); err != nil {
		panic(err)
	}
	m := pub.Messages()[0]
	fmt.Println(m.ID, m.Topic, m.PartitionKey)

	// Once marked sent, the record leaves the backlog.
	for waitCtx.Err() == nil {
		s, err := relay.Stats(ctx)
		if err == nil && s.Unsent == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("unsent: 0")
	stop()
	<-done
	// Output:
	// order-1-placed order-placed alice
	// unsent: 0
}
