// Command connect connects to Orrery over HTTPS, trusting the certificate
// that `orrery cert > orrery.pem` saved, and writes and reads one item; run
// again, it finds what it made and writes the item again.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
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
	ctx := context.Background()
	endpoint := cmp.Or(os.Getenv("COSMOS_ENDPOINT"), "https://localhost:8081/")

	// Trust Orrery's certificate (orrery cert > orrery.pem); over plain
	// http:// the client needs no transport.
	pemBytes, err := os.ReadFile(cmp.Or(os.Getenv("COSMOS_CA"), "orrery.pem"))
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		log.Fatal("no certificate in the PEM file")
	}
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

	// The Go SDK has no createIfNotExists: a 409 Conflict means it exists.
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil && !isConflict(err) {
		log.Fatal(err)
	}
	database, err := client.NewDatabase("shop")
	if err != nil {
		log.Fatal(err)
	}
	props := azcosmos.ContainerProperties{ID: "orders", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/customer"}}}
	if _, err := database.CreateContainer(ctx, props, nil); err != nil && !isConflict(err) {
		log.Fatal(err)
	}
	orders, err := database.NewContainer("orders")
	if err != nil {
		log.Fatal(err)
	}
	alice := azcosmos.NewPartitionKeyString("alice")
	if _, err := orders.UpsertItem(ctx, alice, []byte(`{"id":"1","customer":"alice","total":12.5}`), nil); err != nil {
		log.Fatal(err)
	}
	item, err := orders.ReadItem(ctx, alice, "1", nil)
	if err != nil {
		log.Fatal(err)
	}
	var order struct {
		ID       string  `json:"id"`
		Customer string  `json:"customer"`
		Total    float64 `json:"total"`
	}
	if err := json.Unmarshal(item.Value, &order); err != nil {
		log.Fatal(err)
	}
	out, err := json.Marshal(order)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
