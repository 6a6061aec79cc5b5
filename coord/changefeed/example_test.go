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
	os.Exit(cosmostest.RunMain(m, func(s *cosmostest.Server) { server = s }))
}

// exampleContainers creates a database with a monitored container and a
// lease container (partitioned by /id, as the .NET and Java processors
// require).
func exampleContainers(db string) (monitored, leases *azcosmos.ContainerClient) {
	cred, _ := azcosmos.NewKeyCredential(server.Key)
	client, _ := azcosmos.NewClientWithKey(server.Endpoint, cred, nil)
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil {
		panic(err)
	}
	d, _ := client.NewDatabase(db)
	for id, pk := range map[string]string{"events": "/stream", "leases": "/id"} {
		if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}}}, nil); err != nil {
			panic(err)
		}
	}
	monitored, _ = d.NewContainer("events")
	leases, _ = d.NewContainer("leases")
	return monitored, leases
}

func ExampleProcessor() {
	monitored, leases := exampleContainers("example-processor")
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
	p := changefeed.New(monitored, leases, handle, changefeed.Options{
		Name:         "projector",
		StartFrom:    changefeed.StartFromBeginning(),
		PollInterval: 100 * time.Millisecond,
		Metrics:      changefeed.NewMetrics(prometheus.NewRegistry()),
	})
	_ = p.Run(ctx)

	// The estimator counts what is left to deliver.
	lag, _ := changefeed.NewEstimator(monitored, leases, changefeed.Options{Name: "projector"}).Total(context.Background())
	fmt.Println("remaining:", lag)
	// Output:
	// changed: e1
	// changed: e2
	// changed: e3
	// remaining: 0
}
