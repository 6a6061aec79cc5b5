package changefeed

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// dotnetPrefix is the lease prefix a .NET processor with that name builds
// for the fixture's monitored container, worked out here as .NET does it
// (CosmosContainerExtensions.GetLeasePrefix): the name, then the host of
// the client's endpoint (System.Uri.Host: lower case, no port), then the
// database's resource id as a read of the database returns it, then the
// container's.
func (f *fixture) dotnetPrefix(name string) string {
	f.t.Helper()
	u, err := url.Parse(f.monitoredClient.Endpoint())
	if err != nil {
		f.t.Fatal(err)
	}
	db, _ := f.client.NewDatabase("db")
	dbProps, err := db.Read(context.Background(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return name + strings.ToLower(u.Hostname()) + "_" + dbProps.DatabaseProperties.ResourceID + "_" + f.rid()
}

func TestHostIsDerivedAsDotNetDoes(t *testing.T) {
	for endpoint, want := range map[string]string{
		"https://MyAccount.documents.azure.com:443/":             "myaccount.documents.azure.com",
		"https://myaccount-westus.documents.azure.com:443/":      "myaccount-westus.documents.azure.com",
		"https://localhost:8081/":                                "localhost",
		"http://127.0.0.1:40123/":                                "127.0.0.1",
		"https://[::1]:8081/":                                    "[::1]",
		"https://acct.privatelink.documents.azure.com/some/path": "acct.privatelink.documents.azure.com",
	} {
		if got, err := HostOf(endpoint); err != nil || got != want {
			t.Errorf("HostOf(%q) = %q, %v; want %q", endpoint, got, err, want)
		}
	}
	if _, err := HostOf("not a url"); err == nil {
		t.Error("HostOf of an endpoint without a host: no error")
	}
}

// TestSharesADotNetLeaseStoreWithoutHost seeds the lease container as a .NET
// processor leaves it for a container with several partition key ranges (its
// ".info" and one version-0 lease per range, released, the continuation
// null), with ids whose host part .NET takes from its endpoint. Two Go
// instances of the same processor, Host not set, work from those leases:
// every change is delivered, every lease is owned by a Go instance, and the
// lease container holds nothing but the .NET documents: one set of leases.
func TestSharesADotNetLeaseStoreWithoutHost(t *testing.T) {
	f := newFixture(t, 40000)
	ctx := context.Background()
	ranges := f.pkRanges()
	if len(ranges) < 2 {
		t.Logf("the server gave the container %d range(s) at 40,000 RU/s; the test runs on what it has", len(ranges))
	}
	prefix := f.dotnetPrefix("proc")
	seeded := []string{prefix + ".info"}
	if _, err := f.leases.CreateItem(ctx, azcosmos.NewPartitionKeyString(prefix+".info"), []byte(`{"id":"`+prefix+`.info"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		id := prefix + ".." + r.ID
		doc, _ := json.Marshal(map[string]any{"id": id, "version": 0, "LeaseToken": r.ID, "PartitionId": r.ID,
			"FeedRange": map[string]any{"Range": map[string]any{"min": r.MinInclusive, "max": r.MaxExclusive}},
			"Owner":     nil, "ContinuationToken": nil, "properties": map[string]any{},
			"timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z"), "Mode": "Incremental Feed"})
		if _, err := f.leases.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), doc, nil); err != nil {
			t.Fatal(err)
		}
		seeded = append(seeded, id)
	}
	const pks = 16
	f.write(pks, 0, 5)
	rec := newRecorder()
	f.startWorker("go-1", rec.handler, nil)
	f.startWorker("go-2", rec.handler, nil)
	f.write(pks, 5, 10)
	rec.await(t, pks*10, 60*time.Second)

	// Nothing but the .NET documents, each lease now a Go instance's.
	var ids []string
	pager := f.leases.NewQueryItemsPager("SELECT c.id, c.Owner, c.Mode, c.version FROM c", azcosmos.NewPartitionKey(), nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var d struct {
				ID, Owner, Mode string
				Version         *int
			}
			_ = json.Unmarshal(it, &d)
			ids = append(ids, d.ID)
			if strings.Contains(d.ID, "..") && (!strings.HasPrefix(d.Owner, "go-") || d.Mode != "Incremental Feed" || d.Version == nil || *d.Version != 0) {
				t.Errorf("lease %s after the Go instances took it: owner %q, mode %q, version %v", d.ID, d.Owner, d.Mode, d.Version)
			}
		}
	}
	slices.Sort(ids)
	slices.Sort(seeded)
	if !slices.Equal(ids, seeded) {
		t.Fatalf("the lease container holds %v\nwant only the .NET documents %v", ids, seeded)
	}
	if p, err := New(f.client, f.monitored, f.leases, "proc", rec.handler, nil); err != nil || !strings.HasPrefix(prefix, "proc"+p.Host()+"_") {
		t.Fatalf("the derived host %q is not the one in the .NET prefix %q (%v)", p.Host(), prefix, err)
	}
	t.Logf("%d .NET leases shared, prefix %s", len(ranges), prefix)
}

// A processor whose Host is set by hand to what the endpoint is not (here
// with the port, as hand-built hosts often were) makes a store of its own:
// the mismatch the derived host avoids. A processor of the same name with
// the derived host, making its store next to it, says so through OnError.
func TestAHandSetHostMakesASecondStoreAndIsReported(t *testing.T) {
	f := newFixture(t, 0)
	u, _ := url.Parse(f.monitoredClient.Endpoint())
	if !strings.Contains(u.Host, ":") {
		t.Skipf("the endpoint %q has no port", f.monitoredClient.Endpoint())
	}
	rec := newRecorder()
	w := f.startWorker("hand", rec.handler, func(o *Options) { o.Host = u.Host })
	f.write(1, 0, 1)
	rec.await(t, 1, 60*time.Second)
	w.stop()
	st := &store{c: f.leases, prefix: f.dotnetPrefix("proc")}
	if all, err := st.list(context.Background()); err != nil || len(all) != 0 {
		t.Fatalf("a host with a port wrote %d leases under the .NET prefix (%v)", len(all), err)
	}
	if f.prefix("proc") != f.dotnetPrefix("proc") {
		t.Fatalf("derived prefix %q differs from .NET's %q", f.prefix("proc"), f.dotnetPrefix("proc"))
	}
	warned := make(chan error, 10)
	f.startWorker("derived", rec.handler, func(o *Options) {
		o.OnError = func(lease string, err error) {
			if strings.Contains(err.Error(), "another store") {
				warned <- err
			}
		}
	})
	select {
	case err := <-warned:
		if !strings.Contains(err.Error(), strings.ToLower(u.Host)) {
			t.Fatalf("the warning does not name the other host %q: %v", u.Host, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second store was made without a word")
	}
}
