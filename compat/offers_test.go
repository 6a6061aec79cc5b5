package compat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// badRequestSays asserts err is a 400 whose message contains want.
func badRequestSays(t *testing.T, err error, want string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		t.Fatalf("got %v, want a 400", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("400 without %q: %v", want, err)
	}
}

const msgManualRange = "The offer should have valid throughput values between 400 and 1000000 inclusive in increments of 100."

func TestGoSDKContainerWithoutThroughputHasTheDefaultOffer(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "plain", "/pk")
	got, err := c.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read throughput: %v", err)
	}
	if v, ok := got.ThroughputProperties.ManualThroughput(); !ok || v != 400 {
		t.Fatalf("throughput %d (manual %v), want manual 400", v, ok)
	}
	if got.MinThroughput == nil || *got.MinThroughput != 400 || got.IsReplacePending {
		t.Fatalf("min throughput %v pending %v, want 400 and false", got.MinThroughput, got.IsReplacePending)
	}
	for _, bad := range []int32{300, 450, 2000100} {
		_, err := c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(bad), nil)
		badRequestSays(t, err, msgManualRange)
	}
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewAutoscaleThroughputProperties(4000), nil)
	badRequestSays(t, err, "Please invoke migration API")
	if _, err := c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(1200), nil); err != nil {
		t.Fatalf("replace throughput: %v", err)
	}
	got, _ = c.ReadThroughput(ctx, nil)
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 1200 {
		t.Fatalf("throughput after replace %d, want 1200", v)
	}
}

func TestGoSDKAutoscaleOfferKeepsItsShape(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	tp := azcosmos.NewAutoscaleThroughputProperties(4000)
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "auto", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
		&azcosmos.CreateContainerOptions{ThroughputProperties: &tp}); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("auto")
	got, err := c.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.ThroughputProperties.AutoscaleMaxThroughput(); !ok || v != 4000 {
		t.Fatalf("autoscale max %d (%v), want 4000", v, ok)
	}
	if got.MinThroughput == nil || *got.MinThroughput != 1000 {
		t.Fatalf("autoscale min throughput %v, want 1000", got.MinThroughput)
	}
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewAutoscaleThroughputProperties(4500), nil)
	badRequestSays(t, err, "between 1000 and 1000000 inclusive in increments of 1000")
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(400), nil)
	badRequestSays(t, err, "Updating offer to manually provisioned throughput is not allowed")
	if _, err := c.ReplaceThroughput(ctx, azcosmos.NewAutoscaleThroughputProperties(6000), nil); err != nil {
		t.Fatal(err)
	}
	got, _ = c.ReadThroughput(ctx, nil)
	if v, _ := got.ThroughputProperties.AutoscaleMaxThroughput(); v != 6000 {
		t.Fatalf("autoscale max after replace %d, want 6000", v)
	}
	// A bad creation is refused with the same message, and creates nothing.
	bad := azcosmos.NewAutoscaleThroughputProperties(1500)
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "bad", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
		&azcosmos.CreateContainerOptions{ThroughputProperties: &bad})
	badRequestSays(t, err, "in increments of 1000")
}

func TestGoSDKSharedThroughputDatabaseOwnsTheOffer(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	tp := azcosmos.NewManualThroughputProperties(1000)
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shared"}, &azcosmos.CreateDatabaseOptions{ThroughputProperties: &tp}); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("shared")
	got, err := db.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read database throughput: %v", err)
	}
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 1000 {
		t.Fatalf("database throughput %d, want 1000", v)
	}
	if _, err := db.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(2000), nil); err != nil {
		t.Fatalf("replace database throughput: %v", err)
	}
	got, _ = db.ReadThroughput(ctx, nil)
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 2000 {
		t.Fatalf("database throughput after replace %d, want 2000", v)
	}
	// A container sharing the database's throughput has no offer: the SDK
	// answers 404, as against the service.
	c := newContainer(t, s, "shared", "sharing", "/pk")
	if _, err := c.ReadThroughput(ctx, nil); statusOf(t, err) != http.StatusNotFound {
		t.Fatalf("throughput of a sharing container: %v, want 404", err)
	}
	// One created with throughput of its own has its own.
	own := azcosmos.NewManualThroughputProperties(500)
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "own", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
		&azcosmos.CreateContainerOptions{ThroughputProperties: &own}); err != nil {
		t.Fatal(err)
	}
	oc, _ := db.NewContainer("own")
	if got, err := oc.ReadThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	} else if v, _ := got.ThroughputProperties.ManualThroughput(); v != 500 {
		t.Fatalf("dedicated throughput %d, want 500", v)
	}
	// A database without shared throughput has no offer.
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "plain"}, nil); err != nil {
		t.Fatal(err)
	}
	pdb, _ := s.Client.NewDatabase("plain")
	if _, err := pdb.ReadThroughput(ctx, nil); statusOf(t, err) != http.StatusNotFound {
		t.Fatalf("throughput of a database without shared throughput: %v, want 404", err)
	}
}

func TestOfferQueryByResourceAndIfMatch(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "c", "/pk")
	props, err := c.Read(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rid := props.ContainerProperties.ResourceID
	q := mustJSON(t, map[string]any{"query": "SELECT * FROM root r WHERE r.offerResourceId = @x", "parameters": []map[string]any{{"name": "@x", "value": rid}}})
	resp := rawRequest(t, s, "POST", "/offers", "offers", "", q, map[string]string{
		"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"})
	if resp.status != http.StatusOK {
		t.Fatalf("offer query: %d %s", resp.status, resp.body)
	}
	var feed struct {
		Offers []map[string]any `json:"Offers"`
	}
	if err := json.Unmarshal(resp.body, &feed); err != nil || len(feed.Offers) != 1 {
		t.Fatalf("offer query answered %s, want one offer", resp.body)
	}
	off := feed.Offers[0]
	id, etag := off["id"].(string), off["_etag"].(string)
	if off["offerResourceId"] != rid || off["offerVersion"] != "V2" {
		t.Fatalf("offer %v does not belong to container %s", off, rid)
	}
	off["content"] = map[string]any{"offerThroughput": 600}
	body := mustJSON(t, off)
	link := strings.ToLower(id)
	if r := rawRequest(t, s, "PUT", "/offers/"+id, "offers", link, body, map[string]string{"If-Match": `"00000000-0000-0000-0000-000000000000"`}); r.status != http.StatusPreconditionFailed {
		t.Fatalf("replace with a stale If-Match: %d %s, want 412", r.status, r.body)
	}
	r := rawRequest(t, s, "PUT", "/offers/"+id, "offers", link, body, map[string]string{"If-Match": etag})
	if r.status != http.StatusOK {
		t.Fatalf("replace with the current If-Match: %d %s", r.status, r.body)
	}
	var after map[string]any
	_ = json.Unmarshal(r.body, &after)
	if after["_etag"] == etag {
		t.Fatal("replace kept the offer's etag")
	}
	// The body's stale _etag is refused too.
	if r := rawRequest(t, s, "PUT", "/offers/"+id, "offers", link, body, nil); r.status != http.StatusPreconditionFailed {
		t.Fatalf("replace with a stale body _etag: %d %s, want 412", r.status, r.body)
	}
}
