package compat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// statusOf returns the HTTP status of an SDK error, 0 when err is nil.
func statusOf(t testing.TB, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("not a response error: %v", err)
	}
	return re.StatusCode
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newContainer(t testing.TB, s *orrerytest.Server, db, coll string, paths ...string) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && statusOf(t, err) != http.StatusConflict {
		t.Fatalf("create database: %v", err)
	}
	d, err := s.Client.NewDatabase(db)
	if err != nil {
		t.Fatal(err)
	}
	def := azcosmos.PartitionKeyDefinition{Paths: paths}
	if len(paths) > 1 {
		def.Kind = azcosmos.PartitionKeyKindMultiHash
		def.Version = 2
	}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: coll, PartitionKeyDefinition: def}, nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	c, err := d.NewContainer(coll)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoSDKDatabaseAndContainerCRUD(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	throughput := azcosmos.NewManualThroughputProperties(400)
	resp, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db1"}, &azcosmos.CreateDatabaseOptions{ThroughputProperties: &throughput})
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	if resp.DatabaseProperties.ID != "db1" || resp.ETag == "" {
		t.Fatalf("create database response: %+v", resp.DatabaseProperties)
	}
	_, err = s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db1"}, nil)
	if got := statusOf(t, err); got != http.StatusConflict {
		t.Fatalf("second create database: status %d, want 409", got)
	}
	db, _ := s.Client.NewDatabase("db1")
	if _, err := db.Read(ctx, nil); err != nil {
		t.Fatalf("read database: %v", err)
	}
	dbThroughput, err := db.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read database throughput: %v", err)
	}
	if mt, ok := dbThroughput.ThroughputProperties.ManualThroughput(); !ok || mt != 400 {
		t.Fatalf("database throughput = %v %v, want 400", mt, ok)
	}

	ttl := int32(3600)
	props := azcosmos.ContainerProperties{
		ID:                     "c1",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		DefaultTimeToLive:      &ttl,
		UniqueKeyPolicy:        &azcosmos.UniqueKeyPolicy{UniqueKeys: []azcosmos.UniqueKey{{Paths: []string{"/email"}}}},
		IndexingPolicy: &azcosmos.IndexingPolicy{
			IndexingMode: azcosmos.IndexingModeConsistent, Automatic: true,
			IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}},
			ExcludedPaths: []azcosmos.ExcludedPath{{Path: "/big/*"}},
		},
	}
	cresp, err := db.CreateContainer(ctx, props, nil)
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	got := cresp.ContainerProperties
	// Created without a version, the key is hash V1 and comes back without one, as from the service.
	if got.PartitionKeyDefinition.Kind != azcosmos.PartitionKeyKindHash || got.PartitionKeyDefinition.Version != 0 {
		t.Errorf("partition key definition = %+v, want kind Hash and no version", got.PartitionKeyDefinition)
	}
	if got.DefaultTimeToLive == nil || *got.DefaultTimeToLive != 3600 {
		t.Errorf("defaultTtl = %v, want 3600", got.DefaultTimeToLive)
	}
	if got.UniqueKeyPolicy == nil || len(got.UniqueKeyPolicy.UniqueKeys) != 1 || got.UniqueKeyPolicy.UniqueKeys[0].Paths[0] != "/email" {
		t.Errorf("uniqueKeyPolicy = %+v", got.UniqueKeyPolicy)
	}
	// The service adds /"_etag"/? to the excluded paths it is given.
	if got.IndexingPolicy == nil || len(got.IndexingPolicy.ExcludedPaths) != 2 || got.IndexingPolicy.ExcludedPaths[0].Path != "/big/*" ||
		got.IndexingPolicy.ExcludedPaths[1].Path != `/"_etag"/?` {
		t.Errorf("indexingPolicy = %+v", got.IndexingPolicy)
	}
	_, err = db.CreateContainer(ctx, props, nil)
	if got := statusOf(t, err); got != http.StatusConflict {
		t.Fatalf("second create container: status %d, want 409", got)
	}

	c, _ := db.NewContainer("c1")
	read, err := c.Read(ctx, nil)
	if err != nil {
		t.Fatalf("read container: %v", err)
	}
	newTTL := int32(60)
	read.ContainerProperties.DefaultTimeToLive = &newTTL
	rep, err := c.Replace(ctx, *read.ContainerProperties, nil)
	if err != nil {
		t.Fatalf("replace container: %v", err)
	}
	if *rep.ContainerProperties.DefaultTimeToLive != 60 || rep.ETag == read.ETag {
		t.Errorf("replace container: ttl %v etag %v (was %v)", *rep.ContainerProperties.DefaultTimeToLive, rep.ETag, read.ETag)
	}
	changedPK := *read.ContainerProperties
	changedPK.PartitionKeyDefinition = azcosmos.PartitionKeyDefinition{Paths: []string{"/other"}}
	_, err = c.Replace(ctx, changedPK, nil)
	if got := statusOf(t, err); got != http.StatusBadRequest {
		t.Errorf("replace container with another partition key: status %d, want 400", got)
	}

	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c2", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	pager := db.NewQueryContainersPager("SELECT * FROM c", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("query containers: %v", err)
		}
		for _, p := range page.Containers {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) != 2 {
		t.Errorf("containers = %v, want c1 and c2", ids)
	}

	if _, err := c.Delete(ctx, nil); err != nil {
		t.Fatalf("delete container: %v", err)
	}
	_, err = c.Read(ctx, nil)
	if got := statusOf(t, err); got != http.StatusNotFound {
		t.Fatalf("read deleted container: status %d, want 404", got)
	}
	if _, err := db.Delete(ctx, nil); err != nil {
		t.Fatalf("delete database: %v", err)
	}
	_, err = db.Read(ctx, nil)
	if got := statusOf(t, err); got != http.StatusNotFound {
		t.Fatalf("read deleted database: status %d, want 404", got)
	}
}

func TestGoSDKItemCRUD(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "items", "/pk")
	pkA := azcosmos.NewPartitionKeyString("a")
	pkB := azcosmos.NewPartitionKeyString("b")

	item := map[string]any{"id": "1", "pk": "a", "n": 1, "nested": map[string]any{"x": []any{1, "two"}}}
	cr, err := c.CreateItem(ctx, pkA, mustJSON(t, item), nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if cr.RawResponse.StatusCode != http.StatusCreated || cr.ETag == "" {
		t.Fatalf("create: status %d etag %q", cr.RawResponse.StatusCode, cr.ETag)
	}
	if len(cr.Value) != 0 {
		t.Errorf("create with the Go SDK's default Prefer: return=minimal returned a body: %s", cr.Value)
	}
	_, err = c.CreateItem(ctx, pkA, mustJSON(t, item), nil)
	if got := statusOf(t, err); got != http.StatusConflict {
		t.Fatalf("second create: status %d, want 409", got)
	}
	// The same id in another logical partition is another item.
	if _, err := c.CreateItem(ctx, pkB, mustJSON(t, map[string]any{"id": "1", "pk": "b"}), nil); err != nil {
		t.Fatalf("create same id in partition b: %v", err)
	}

	rr, err := c.ReadItem(ctx, pkA, "1", nil)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(rr.Value, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"_rid", "_self", "_etag", "_ts", "_attachments"} {
		if _, ok := doc[p]; !ok {
			t.Errorf("read item lacks system property %s: %s", p, rr.Value)
		}
	}
	if doc["_etag"] != string(rr.ETag) || doc["_etag"] != string(cr.ETag) {
		t.Errorf("etag header %q, body %v, create %q", rr.ETag, doc["_etag"], cr.ETag)
	}
	if rr.SessionToken == nil || *rr.SessionToken == "" {
		t.Errorf("no session token on read")
	}
	if rr.RequestCharge <= 0 {
		t.Errorf("request charge %v", rr.RequestCharge)
	}

	etag := rr.ETag

	item["n"] = 2
	rep, err := c.ReplaceItem(ctx, pkA, "1", mustJSON(t, item), &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if err != nil {
		t.Fatalf("replace with current etag: %v", err)
	}
	if rep.ETag == etag {
		t.Errorf("replace kept the etag %q", etag)
	}
	_, err = c.ReplaceItem(ctx, pkA, "1", mustJSON(t, item), &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if got := statusOf(t, err); got != http.StatusPreconditionFailed {
		t.Fatalf("replace with stale etag: status %d, want 412", got)
	}
	_, err = c.ReplaceItem(ctx, pkA, "missing", mustJSON(t, map[string]any{"id": "missing", "pk": "a"}), nil)
	if got := statusOf(t, err); got != http.StatusNotFound {
		t.Fatalf("replace missing: status %d, want 404", got)
	}

	up, err := c.UpsertItem(ctx, pkA, mustJSON(t, map[string]any{"id": "2", "pk": "a"}), nil)
	if err != nil || up.RawResponse.StatusCode != http.StatusCreated {
		t.Fatalf("upsert new: %v %v", err, up.RawResponse)
	}
	up, err = c.UpsertItem(ctx, pkA, mustJSON(t, map[string]any{"id": "2", "pk": "a", "v": 1}), &azcosmos.ItemOptions{EnableContentResponseOnWrite: true})
	if err != nil || up.RawResponse.StatusCode != http.StatusOK {
		t.Fatalf("upsert existing: %v %v", err, up.RawResponse)
	}
	if !json.Valid(up.Value) || len(up.Value) == 0 {
		t.Errorf("upsert with content response: body %q", up.Value)
	}

	_, err = c.ReadItem(ctx, pkB, "2", nil)
	if got := statusOf(t, err); got != http.StatusNotFound {
		t.Fatalf("read in wrong partition: status %d, want 404", got)
	}
	_, err = c.CreateItem(ctx, pkB, mustJSON(t, map[string]any{"id": "3", "pk": "a"}), nil)
	if got := statusOf(t, err); got != http.StatusBadRequest {
		t.Fatalf("create with mismatched partition key: status %d, want 400", got)
	}

	_, err = c.DeleteItem(ctx, pkA, "2", &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if got := statusOf(t, err); got != http.StatusPreconditionFailed {
		t.Fatalf("delete with stale etag: status %d, want 412", got)
	}
	if _, err := c.DeleteItem(ctx, pkA, "2", nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.DeleteItem(ctx, pkA, "2", nil)
	if got := statusOf(t, err); got != http.StatusNotFound {
		t.Fatalf("second delete: status %d, want 404", got)
	}

	// Null and absent partition key values are distinct partitions.
	if _, err := c.CreateItem(ctx, azcosmos.NullPartitionKey, mustJSON(t, map[string]any{"id": "n", "pk": nil}), nil); err != nil {
		t.Fatalf("create with null pk: %v", err)
	}
	if _, err := c.ReadItem(ctx, azcosmos.NullPartitionKey, "n", nil); err != nil {
		t.Fatalf("read with null pk: %v", err)
	}
	if _, err := c.CreateItem(ctx, azcosmos.NullPartitionKey, mustJSON(t, map[string]any{"id": "u"}), nil); statusOf(t, err) != http.StatusBadRequest {
		t.Fatalf("create item without pk property under the null key: %v, want 400", err)
	}
	// Ids with spaces and unicode round-trip through the URL.
	odd := "id with space é"
	if _, err := c.CreateItem(ctx, pkA, mustJSON(t, map[string]any{"id": odd, "pk": "a"}), nil); err != nil {
		t.Fatalf("create odd id: %v", err)
	}
	if _, err := c.ReadItem(ctx, pkA, odd, nil); err != nil {
		t.Fatalf("read odd id: %v", err)
	}
}

func TestGoSDKHierarchicalPartitionKey(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "hpk", "/tenant", "/user")
	pk := azcosmos.NewPartitionKeyString("t1").AppendString("u1")
	if _, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "1", "tenant": "t1", "user": "u1"}), nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := c.ReadItem(ctx, pk, "1", nil); err != nil {
		t.Fatalf("read: %v", err)
	}
	other := azcosmos.NewPartitionKeyString("t1").AppendString("u2")
	if _, err := c.ReadItem(ctx, other, "1", nil); statusOf(t, err) != http.StatusNotFound {
		t.Fatalf("read under another user: %v, want 404", err)
	}
	if _, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("t1"), "1", nil); statusOf(t, err) != http.StatusBadRequest {
		t.Fatalf("point read with a partial hierarchical key: %v, want 400", err)
	}
	if _, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "1", "tenant": "t1", "user": "u1"}), nil); statusOf(t, err) != http.StatusConflict {
		t.Fatalf("duplicate create: %v, want 409", err)
	}
}

func TestGoSDKReadManyAndThroughput(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "many", "/pk")
	var ids []azcosmos.ItemIdentity
	for i := 0; i < 10; i++ {
		pk := []string{"a", "b"}[i%2]
		id := string(rune('0' + i))
		if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), mustJSON(t, map[string]any{"id": id, "pk": pk}), nil); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			ids = append(ids, azcosmos.ItemIdentity{ID: id, PartitionKey: azcosmos.NewPartitionKeyString(pk)})
		}
	}
	ids = append(ids, azcosmos.ItemIdentity{ID: "missing", PartitionKey: azcosmos.NewPartitionKeyString("a")})
	resp, err := c.ReadManyItems(ctx, ids, nil)
	if err != nil {
		t.Fatalf("read many: %v", err)
	}
	if len(resp.Items) != 4 {
		t.Fatalf("read many returned %d items, want 4", len(resp.Items))
	}

	db, _ := s.Client.NewDatabase("db")
	tp := azcosmos.NewManualThroughputProperties(400)
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "tp", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
		&azcosmos.CreateContainerOptions{ThroughputProperties: &tp}); err != nil {
		t.Fatal(err)
	}
	tc, _ := db.NewContainer("tp")
	got, err := tc.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read throughput: %v", err)
	}
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 400 {
		t.Fatalf("throughput %d, want 400", v)
	}
	if _, err := tc.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(1000), nil); err != nil {
		t.Fatalf("replace throughput: %v", err)
	}
	got, _ = tc.ReadThroughput(ctx, nil)
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 1000 {
		t.Fatalf("throughput after replace %d, want 1000", v)
	}
	// A container created without throughput has the service's default offer.
	got, err = c.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read default throughput: %v", err)
	}
	if v, _ := got.ThroughputProperties.ManualThroughput(); v != 400 {
		t.Fatalf("default throughput %d, want 400", v)
	}
}
