// Command connect is the README's Go snippet: it connects to Orrery over
// HTTPS, trusting the certificate that `orrery cert > orrery.pem` printed,
// and writes and reads one item. compat/connect_test.go runs it.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// The emulator's well-known key, which Orrery uses unless started with --key.
const key = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

func main() {
	// README:begin
	endpoint := cmp.Or(os.Getenv("COSMOS_ENDPOINT"), "https://localhost:8081/")

	// Trust Orrery's certificate (orrery cert > orrery.pem).
	pemBytes, err := os.ReadFile(cmp.Or(os.Getenv("COSMOS_CA"), "orrery.pem"))
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		log.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: httpClient},
	})
	if err != nil {
		log.Fatal(err)
	}
	// README:end

	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil {
		log.Fatal(err)
	}
	db, _ := client.NewDatabase("shop")
	props := azcosmos.ContainerProperties{ID: "orders", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/customer"}}}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil {
		log.Fatal(err)
	}
	orders, _ := db.NewContainer("orders")
	pk := azcosmos.NewPartitionKeyString("alice")
	if _, err := orders.CreateItem(ctx, pk, []byte(`{"id":"1","customer":"alice","total":12.5}`), nil); err != nil {
		log.Fatal(err)
	}
	item, err := orders.ReadItem(ctx, pk, "1", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(item.Value))
}
