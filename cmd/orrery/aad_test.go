package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// TestAADFlags: the serve flags' files (a JWKS and a role file) configure
// verification, and the Go SDK's token credential then writes as a Data
// Contributor on its container and reads as a Data Reader; bad flag
// combinations are refused.
func TestAADFlags(t *testing.T) {
	issuer, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwks, roles := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "roles.json")
	if err := os.WriteFile(jwks, issuer.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(roles, []byte(`{"roleAssignments": [
		{"principalId": "w", "roleDefinitionId": "00000000-0000-0000-0000-000000000002", "scope": "/dbs/db/colls/c"},
		{"principalId": "r", "roleDefinitionId": "Cosmos DB Built-in Data Reader", "scope": "/"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := aadConfig("", jwks, roles, issuer.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != server.AADVerify {
		t.Fatalf("--aad-jwks: mode %v, want verify", cfg.Mode)
	}
	s := orrerytest.StartWith(t, orrerytest.Options{AAD: cfg})
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	pk := azcosmos.NewPartitionKeyString("A")
	for _, who := range []struct {
		oid  string
		want int
	}{{"w", http.StatusCreated}, {"r", http.StatusForbidden}} {
		client, err := s.NewAADClient(issuer.Credential(who.oid, nil))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := client.NewContainer("db", "c")
		_, err = c.UpsertItem(ctx, pk, []byte(`{"id":"1","pk":"A"}`), nil)
		status := http.StatusCreated
		if err != nil {
			var re *azcore.ResponseError
			if !errors.As(err, &re) {
				t.Fatalf("%s: %v", who.oid, err)
			}
			status = re.StatusCode
		}
		if status != who.want {
			t.Errorf("%s: upsert answered %d, want %d: %v", who.oid, status, who.want, err)
		}
		if _, err := c.ReadItem(ctx, pk, "1", nil); err != nil {
			t.Errorf("%s: read: %v", who.oid, err)
		}
	}

	for _, bad := range [][5]string{
		{"emulator", jwks, "", "", ""},
		{"verify", "", "", "", ""},
		{"sometimes", "", "", "", ""},
		{"", filepath.Join(dir, "missing.json"), "", "", ""},
		{"", jwks, roles + ".missing", "", ""},
	} {
		if _, err := aadConfig(bad[0], bad[1], bad[2], bad[3], bad[4]); err == nil {
			t.Errorf("aadConfig%q accepted", bad)
		}
	}
	if err := os.WriteFile(roles, []byte(`{"roleAssignments": [{"principalId": "w", "roleDefinitionId": "Owner", "scope": "/"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := aadConfig("", jwks, roles, "", ""); err == nil {
		t.Error("a role other than the two built-in data roles was accepted")
	}
}
