package compat

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/golang-jwt/jwt/v5"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

const (
	oidWriter = "11111111-1111-1111-1111-111111111111"
	oidReader = "22222222-2222-2222-2222-222222222222"
	oidNobody = "33333333-3333-3333-3333-333333333333"
)

// aadServer starts a server that verifies Entra ID tokens of issuer: the
// writer is a Data Contributor on database "db", the reader a Data Reader
// on container "db/c" (created with the master key, as AAD principals
// cannot create them).
func aadServer(t *testing.T, issuer *orrerytest.Issuer) *orrerytest.Server {
	t.Helper()
	s := orrerytest.StartWith(t, orrerytest.Options{AAD: server.AAD{
		Mode:    server.AADVerify,
		Keys:    issuer.Keys(),
		Issuers: []string{issuer.Name},
		Roles: []server.RoleAssignment{
			{PrincipalID: oidWriter, RoleDefinitionID: server.DataContributorRole, Scope: "/dbs/db"},
			{PrincipalID: oidReader, RoleDefinitionID: "Cosmos DB Built-in Data Reader", Scope: "/dbs/db/colls/c"},
		},
	}})
	newContainer(t, s, "db", "c", "/pk")
	newContainer(t, s, "db", "other", "/pk")
	return s
}

// aadContainer is container db/c seen by a client signing in with cred.
func aadContainer(t *testing.T, s *orrerytest.Server, cred azcore.TokenCredential) (*azcosmos.Client, *azcosmos.ContainerClient) {
	t.Helper()
	client, err := s.NewAADClient(cred)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewContainer("db", "c")
	if err != nil {
		t.Fatal(err)
	}
	return client, c
}

// wantRefused checks an SDK error's status and that its message contains
// want.
func wantRefused(t *testing.T, what string, err error, status int, want string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("%s: want %d, got %v", what, status, err)
	}
	if re.StatusCode != status {
		t.Errorf("%s: status %d, want %d: %v", what, re.StatusCode, status, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error does not say %q: %v", what, want, err)
	}
}

// TestGoSDKEntraIDContributor: a Data Contributor signs in with a token
// credential and does CRUD, patch, batch and queries through the Go SDK;
// managing databases and containers is refused as the service refuses it,
// and its role reaches no other database.
func TestGoSDKEntraIDContributor(t *testing.T) {
	issuer, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	s := aadServer(t, issuer)
	ctx := context.Background()
	client, c := aadContainer(t, s, issuer.Credential(oidWriter, nil))
	pk := azcosmos.NewPartitionKeyString("A")
	if _, err := c.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"A","n":1}`), nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	r, err := c.ReadItem(ctx, pk, "1", nil)
	if err != nil || !strings.Contains(string(r.Value), `"n":1`) {
		t.Fatalf("read: %v %s", err, r.Value)
	}
	if _, err := c.ReplaceItem(ctx, pk, "1", []byte(`{"id":"1","pk":"A","n":2}`), nil); err != nil {
		t.Fatalf("replace: %v", err)
	}
	patch := azcosmos.PatchOperations{}
	patch.AppendIncrement("/n", 5)
	if _, err := c.PatchItem(ctx, pk, "1", patch, nil); err != nil {
		t.Fatalf("patch: %v", err)
	}
	batch := c.NewTransactionalBatch(pk)
	batch.CreateItem([]byte(`{"id":"2","pk":"A","n":10}`), nil)
	batch.UpsertItem([]byte(`{"id":"3","pk":"A","n":20}`), nil)
	if br, err := c.ExecuteTransactionalBatch(ctx, batch, nil); err != nil || !br.Success {
		t.Fatalf("batch: %v", err)
	}
	rows := queryRows(t, c, "SELECT VALUE c.n FROM c ORDER BY c.id", pk)
	if got := rawList(rows); got != "[7, 10, 20]" {
		t.Errorf("query: %s", got)
	}
	if _, err := c.DeleteItem(ctx, pk, "2", nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// Metadata it needs: the container's properties.
	if _, err := c.Read(ctx, nil); err != nil {
		t.Errorf("read container: %v", err)
	}
	// Management is not for Entra principals.
	_, err = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "mine"}, nil)
	wantRefused(t, "create database", err, http.StatusForbidden, "does not have required RBAC permissions to perform action [Microsoft.DocumentDB/databaseAccounts/sqlDatabases/write]")
	db, _ := client.NewDatabase("db")
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c2", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil)
	wantRefused(t, "create container", err, http.StatusForbidden, "sqlDatabases/containers/write")
	_, err = c.Delete(ctx, nil)
	wantRefused(t, "delete container", err, http.StatusForbidden, "RBAC")
	// Nothing was created by the refused requests.
	if _, err := s.Client.NewDatabase("mine"); err == nil {
		d, _ := s.Client.NewDatabase("mine")
		if _, err := d.Read(ctx, nil); err == nil {
			t.Error("the refused database exists")
		}
	}
	// The role covers db only: another principal's token, or a database it
	// has no role in, is refused.
	_, nobody := aadContainer(t, s, issuer.Credential(oidNobody, nil))
	_, err = nobody.CreateItem(ctx, pk, []byte(`{"id":"9","pk":"A"}`), nil)
	wantRefused(t, "principal without a role", err, http.StatusForbidden, oidNobody)
}

// TestGoSDKEntraIDReader: a Data Reader on one container reads and
// queries it, and is refused writes (403) there and reads elsewhere.
func TestGoSDKEntraIDReader(t *testing.T) {
	issuer, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	s := aadServer(t, issuer)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("A")
	master, _ := s.Client.NewContainer("db", "c")
	if _, err := master.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"A","n":1}`), nil); err != nil {
		t.Fatal(err)
	}
	client, c := aadContainer(t, s, issuer.Credential(oidReader, nil))
	if _, err := c.ReadItem(ctx, pk, "1", nil); err != nil {
		t.Fatalf("reader read: %v", err)
	}
	if got := rawList(queryRows(t, c, "SELECT VALUE c.n FROM c", pk)); got != "[1]" {
		t.Errorf("reader query: %s", got)
	}
	_, err = c.CreateItem(ctx, pk, []byte(`{"id":"2","pk":"A"}`), nil)
	wantRefused(t, "reader create", err, http.StatusForbidden, "items/*")
	_, err = c.UpsertItem(ctx, pk, []byte(`{"id":"1","pk":"A","n":9}`), nil)
	wantRefused(t, "reader upsert", err, http.StatusForbidden, oidReader)
	_, err = c.DeleteItem(ctx, pk, "1", nil)
	wantRefused(t, "reader delete", err, http.StatusForbidden, "RBAC")
	batch := c.NewTransactionalBatch(pk)
	batch.DeleteItem("1", nil)
	_, err = c.ExecuteTransactionalBatch(ctx, batch, nil)
	wantRefused(t, "reader batch delete", err, http.StatusForbidden, "")
	if r, err := master.ReadItem(ctx, pk, "1", nil); err != nil || !strings.Contains(string(r.Value), `"n":1`) {
		t.Fatalf("the reader's writes changed the item: %v %s", err, r.Value)
	}
	other, _ := client.NewContainer("db", "other")
	_, err = other.ReadItem(ctx, pk, "1", nil)
	wantRefused(t, "reader outside its scope", err, http.StatusForbidden, "items/read")
}

// TestGoSDKEntraIDRefusedTokens: a forged signature, a wrong audience, an
// expired token, a token of another issuer and a token without a principal
// are each a 401, and change nothing.
func TestGoSDKEntraIDRefusedTokens(t *testing.T) {
	issuer, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	s := aadServer(t, issuer)
	forger, err := orrerytest.NewIssuer() // same kid and iss, another key
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	stranger.Name = "https://sts.windows.net/ffffffff-0000-0000-0000-000000000000/"
	stranger.KeyID = "other"
	cases := []struct {
		name string
		cred azcore.TokenCredential
		want string
	}{
		{"forged signature", forger.Credential(oidWriter, nil), "signature is invalid"},
		{"wrong audience", issuer.Credential(oidWriter, func(c jwt.MapClaims) { c["aud"] = "https://storage.azure.com" }), "audience"},
		{"expired", issuer.Credential(oidWriter, func(c jwt.MapClaims) {
			c["exp"] = time.Now().Add(-10 * time.Minute).Unix()
			c["nbf"] = time.Now().Add(-time.Hour).Unix()
		}), "expired"},
		{"not yet valid", issuer.Credential(oidWriter, func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), "not valid yet"},
		{"unknown key", stranger.Credential(oidWriter, nil), "no key"},
		{"wrong issuer", issuer.Credential(oidWriter, func(c jwt.MapClaims) { c["iss"] = "https://evil.example/" }), "issuer"},
		{"no principal", issuer.Credential(oidWriter, func(c jwt.MapClaims) { delete(c, "oid") }), "oid"},
	}
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("A")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := azcosmos.NewClient(s.Endpoint, tc.cred, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := client.NewContainer("db", "c")
			_, err = c.CreateItem(ctx, pk, []byte(`{"id":"x","pk":"A"}`), nil)
			wantRefused(t, "create", err, http.StatusUnauthorized, tc.want)
		})
	}
	master, _ := s.Client.NewContainer("db", "c")
	if _, err := master.ReadItem(ctx, pk, "x", nil); statusOf(t, err) != http.StatusNotFound {
		t.Errorf("a refused token wrote: %v", err)
	}
}

// TestGoSDKEntraIDEmulatorMode: by default (the emulator's key) any
// well-formed unexpired JWT is accepted, signed by any key, as the
// official emulator does, and acts as a Data Contributor; an expired or
// malformed one is a 401, and with AAD off every token is.
func TestGoSDKEntraIDEmulatorMode(t *testing.T) {
	s := orrerytest.Start(t)
	newContainer(t, s, "db", "c", "/pk")
	anyone, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("A")
	client, c := aadContainer(t, s, anyone.Credential("whoever", nil))
	if _, err := c.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"A"}`), nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := rawList(queryRows(t, c, "SELECT VALUE c.id FROM c", pk)); got != `["1"]` {
		t.Errorf("query: %s", got)
	}
	_, err = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "x"}, nil)
	wantRefused(t, "create database", err, http.StatusForbidden, "RBAC")
	_, expired := aadContainer(t, s, anyone.Credential("whoever", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))
	_, err = expired.ReadItem(ctx, pk, "1", nil)
	wantRefused(t, "expired", err, http.StatusUnauthorized, "expired")
	_, garbage := aadContainer(t, s, staticToken("not.a.jwt"))
	_, err = garbage.ReadItem(ctx, pk, "1", nil)
	wantRefused(t, "malformed", err, http.StatusUnauthorized, "malformed")

	off := orrerytest.StartWith(t, orrerytest.Options{AAD: server.AAD{Mode: server.AADOff}})
	newContainer(t, off, "db", "c", "/pk")
	_, c = aadContainer(t, off, anyone.Credential("whoever", nil))
	_, err = c.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"A"}`), nil)
	wantRefused(t, "AAD off", err, http.StatusUnauthorized, "not accepted")
}

// staticToken is a credential that always returns the same token.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}
