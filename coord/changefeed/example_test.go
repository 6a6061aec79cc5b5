package changefeed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/prometheus/client_golang/prometheus"
)

// server is the server of the runnable examples.
var server *cosmostest.Server

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorker())
	}
	os.Exit(cosmostest.RunMain(m, func(s *cosmostest.Server) { server = s }))
}

// exampleContainers creates a database with a monitored container and a
// lease container (partitioned by /id, as the .NET and Java processors
// require).
func exampleContainers(db string) (client *azcosmos.Client, monitored, leases *azcosmos.ContainerClient) {
	cred, _ := azcosmos.NewKeyCredential(server.Key)
	client, _ = azcosmos.NewClientWithKey(server.Endpoint, cred, nil)
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil {
		panic(err)
	}
	d, _ := client.NewDatabase(db)
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "events",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/stream"}}}, nil); err != nil {
		panic(err)
	}
	monitored, _ = d.NewContainer("events")
	leases, err := changefeed.CreateLeaseContainer(ctx, d, "leases") // partitioned by /id
	if err != nil {
		panic(err)
	}
	return client, monitored, leases
}

func ExampleProcessor() {
	client, monitored, leases := exampleContainers("example-processor")
	ctx, stop := context.WithCancel(context.Background())
	for _, id := range []string{"e1", "e2", "e3"} {
		doc, _ := json.Marshal(map[string]string{"id": id, "stream": "s1"})
		if _, err := monitored.CreateItem(ctx, azcosmos.NewPartitionKeyString("s1"), doc, nil); err != nil {
			panic(err)
		}
	}

	seen := 0
	handle := func(ctx context.Context, b changefeed.Batch) error {
		for _, c := range b.Changes {
			var doc struct{ ID string }
			_ = json.Unmarshal(c, &doc)
			fmt.Println("changed:", doc.ID)
			if seen++; seen == 3 {
				stop() // Run checkpoints this batch, releases its leases and returns
			}
		}
		return nil
	}
	p, err := changefeed.New(client, monitored, leases, "projector", handle, &changefeed.Options{
		StartFrom:    changefeed.StartFromBeginning(),
		PollInterval: 100 * time.Millisecond,
		Metrics:      changefeed.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		panic(err)
	}
	_ = p.Run(ctx)

	// The estimator counts what is left to deliver.
	lag, _ := p.Estimator().Total(context.Background())
	fmt.Println("remaining:", lag)
	// Output:
	// changed: e1
	// changed: e2
	// changed: e3
	// remaining: 0
}
