// Package containers shows Orrery in containers: compose.yaml runs it
// beside a program, and the test below starts it from a Go test with
// Testcontainers, for suites that want the server in a container rather
// than in process (orrerytest). It is a module of its own so that the
// server's module does not depend on Docker's client.
package containers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// emulatorKey is the Cosmos DB emulator's well-known key, Orrery's default.
const emulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// startOrrery builds the image from the repository's Dockerfile, runs it,
// and returns its plain-HTTP endpoint once /_health answers. The container
// is removed when the test ends. (An image you publish goes in place of the
// Dockerfile: testcontainers.Run(ctx, "your/orrery:tag", ...).)
func startOrrery(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ctr, err := testcontainers.Run(ctx, "",
		testcontainers.WithDockerfile(testcontainers.FromDockerfile{Context: "../..", Dockerfile: "Dockerfile", KeepImage: true}),
		testcontainers.WithExposedPorts("8081/tcp"),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/_health").WithPort("8081/tcp")),
	)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := ctr.PortEndpoint(ctx, "8081/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}
	return endpoint + "/"
}

// The official Go SDK creates, writes and reads through Orrery in a
// container, as through the emulator's.
func TestOrreryInAContainer(t *testing.T) {
	testcontainers.SkipIfProviderIsNotHealthy(t)
	endpoint := startOrrery(t)
	ctx := context.Background()
	cred, err := azcosmos.NewKeyCredential(emulatorKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil && !isConflict(err) {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("shop")
	props := azcosmos.ContainerProperties{ID: "orders", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/customer"}}}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil && !isConflict(err) {
		t.Fatal(err)
	}
	orders, _ := db.NewContainer("orders")
	pk := azcosmos.NewPartitionKeyString("alice")
	if _, err := orders.UpsertItem(ctx, pk, []byte(`{"id":"1","customer":"alice","total":12.5}`), nil); err != nil {
		t.Fatal(err)
	}
	item, err := orders.ReadItem(ctx, pk, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Total float64 `json:"total"`
	}
	if err := json.Unmarshal(item.Value, &got); err != nil || got.Total != 12.5 {
		t.Fatalf("read %s", item.Value)
	}
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
