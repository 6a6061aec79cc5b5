package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

func encryptionKeyBody(id, kekValue string) []byte {
	return []byte(`{"id":"` + id + `","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AAECAw==",` +
		`"keyWrapMetadata":{"type":"TEST","name":"kek","value":"` + kekValue + `","algorithm":"RSA-OAEP"}}`)
}

// TestClientEncryptionKeysAreCatalogChildrenOfTheirDatabase walks a key
// through the catalog's child CRUD: created once (409 again), read by id
// and RID, listed, rewrapped under If-Match (412 when stale), and gone
// with its database.
func TestClientEncryptionKeysAreCatalogChildrenOfTheirDatabase(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"cdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	created, err := e.CreateClientEncryptionKey(ctx, "cdb", encryptionKeyBody("k1", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(created.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_rid", "_self", "_etag", "_ts", "keyWrapMetadata", "wrappedDataEncryptionKey"} {
		if _, ok := body[k]; !ok {
			t.Errorf("the created key lacks %s: %s", k, created.Body)
		}
	}
	if self := body["_self"].(string); !strings.HasSuffix(self, "/clientencryptionkeys/"+created.RID+"/") {
		t.Errorf("_self %q", self)
	}
	if _, err := e.CreateClientEncryptionKey(ctx, "cdb", encryptionKeyBody("k1", "v2")); statusOf(err) != 409 {
		t.Fatalf("a second key k1: %v, want 409", err)
	}
	for _, name := range []string{"k1", created.RID} {
		if got, err := e.ReadClientEncryptionKey(ctx, "cdb", name); err != nil || got.ETag != created.ETag {
			t.Fatalf("read %s: %v, %v", name, got, err)
		}
	}
	if _, err := e.ReplaceClientEncryptionKey(ctx, "cdb", "k1", encryptionKeyBody("k1", "v2"), `"stale"`); statusOf(err) != 412 {
		t.Fatalf("a rewrap with a stale If-Match: %v, want 412", err)
	}
	if _, err := e.ReplaceClientEncryptionKey(ctx, "cdb", "k1", encryptionKeyBody("k2", "v2"), ""); statusOf(err) != 400 {
		t.Fatalf("a rewrap with another id: %v, want 400", err)
	}
	rewrapped, err := e.ReplaceClientEncryptionKey(ctx, "cdb", "k1", encryptionKeyBody("k1", "v2"), created.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if rewrapped.RID != created.RID || rewrapped.ETag == created.ETag || !strings.Contains(string(rewrapped.Body), `"value":"v2"`) {
		t.Fatalf("rewrapped %s", rewrapped.Body)
	}
	if _, err := e.ReadClientEncryptionKey(ctx, "cdb", "nope"); statusOf(err) != 404 {
		t.Fatalf("read of a missing key: %v, want 404", err)
	}
	if _, err := e.CreateClientEncryptionKey(ctx, "nodb", encryptionKeyBody("k1", "v1")); statusOf(err) != 404 {
		t.Fatalf("a key in a missing database: %v, want 404", err)
	}
	if list, err := e.ListClientEncryptionKeys(ctx, "cdb"); err != nil || len(list) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if err := e.DeleteDatabase(ctx, "cdb", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"cdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	if list, err := e.ListClientEncryptionKeys(ctx, "cdb"); err != nil || len(list) != 0 {
		t.Fatalf("keys of the recreated database: %v, %v", list, err)
	}
}

// TestClientEncryptionKeyBodiesAreChecked refuses what a key cannot be
// used without.
func TestClientEncryptionKeyBodiesAreChecked(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"cdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"id":"k","encryptionAlgorithm":"AES","wrappedDataEncryptionKey":"AA==","keyWrapMetadata":{"type":"t","name":"n","value":"v"}}`,
		`{"id":"k","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","keyWrapMetadata":{"type":"t","name":"n","value":"v"}}`,
		`{"id":"k","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"not base64!","keyWrapMetadata":{"type":"t","name":"n","value":"v"}}`,
		`{"id":"k","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AA=="}`,
		`{"id":"k","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AA==","keyWrapMetadata":{"type":"t","name":"n"}}`,
		`{"encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AA==","keyWrapMetadata":{"type":"t","name":"n","value":"v"}}`,
	} {
		if _, err := e.CreateClientEncryptionKey(ctx, "cdb", []byte(body)); statusOf(err) != 400 {
			t.Errorf("%s: %v, want 400", body, err)
		}
	}
}

// TestClientEncryptionPolicyIsValidatedAsTheServiceDoes creates containers
// with policies the service refuses (400) and accepts, and keeps an
// accepted policy across a replace that gives none.
func TestClientEncryptionPolicyIsValidatedAsTheServiceDoes(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"pdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	path := func(p, typ string) string {
		return `{"path":"` + p + `","clientEncryptionKeyId":"k","encryptionType":"` + typ + `","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256"}`
	}
	container := func(id, policy string) []byte {
		return []byte(`{"id":"` + id + `","partitionKey":{"paths":["/pk"]},"clientEncryptionPolicy":` + policy + `}`)
	}
	for name, policy := range map[string]string{
		"not an object":        `[]`,
		"no paths":             `{"policyFormatVersion":2}`,
		"version 3":            `{"includedPaths":[` + path("/a", "Deterministic") + `],"policyFormatVersion":3}`,
		"version 0":            `{"includedPaths":[` + path("/a", "Deterministic") + `],"policyFormatVersion":0}`,
		"relative path":        `{"includedPaths":[` + path("a", "Deterministic") + `],"policyFormatVersion":2}`,
		"root path":            `{"includedPaths":[` + path("/", "Deterministic") + `],"policyFormatVersion":2}`,
		"nested path":          `{"includedPaths":[` + path("/a/b", "Deterministic") + `],"policyFormatVersion":2}`,
		"duplicate path":       `{"includedPaths":[` + path("/a", "Deterministic") + `,` + path("/a", "Randomized") + `],"policyFormatVersion":2}`,
		"unknown type":         `{"includedPaths":[` + path("/a", "Plain") + `],"policyFormatVersion":2}`,
		"randomized id":        `{"includedPaths":[` + path("/id", "Randomized") + `],"policyFormatVersion":2}`,
		"randomized key":       `{"includedPaths":[` + path("/pk", "Randomized") + `],"policyFormatVersion":2}`,
		"key under version 1":  `{"includedPaths":[` + path("/pk", "Deterministic") + `],"policyFormatVersion":1}`,
		"id under version 1":   `{"includedPaths":[` + path("/id", "Deterministic") + `]}`,
		"no key id":            `{"includedPaths":[{"path":"/a","encryptionType":"Deterministic","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256"}],"policyFormatVersion":2}`,
		"unknown algorithm":    `{"includedPaths":[{"path":"/a","clientEncryptionKeyId":"k","encryptionType":"Deterministic","encryptionAlgorithm":"ROT13"}],"policyFormatVersion":2}`,
		"path is not a string": `{"includedPaths":[{"path":5,"clientEncryptionKeyId":"k","encryptionType":"Deterministic","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256"}]}`,
	} {
		if _, err := e.CreateContainer(ctx, "pdb", container("c", policy), nil); statusOf(err) != 400 {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	res, err := e.CreateContainer(ctx, "pdb", container("c", `{"includedPaths":[`+path("/a", "Randomized")+`,`+path("/pk", "Deterministic")+`,`+path("/id", "Deterministic")+`],"policyFormatVersion":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := e.CreateContainer(ctx, "pdb", container("v1", `{"includedPaths":[`+path("/a", "Deterministic")+`]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v1.Body), `"policyFormatVersion":1`) {
		t.Errorf("a policy without a version is not given version 1: %s", v1.Body)
	}
	replaced, err := e.ReplaceContainer(ctx, "pdb", "c", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	_ = json.Unmarshal(res.Body, &before)
	_ = json.Unmarshal(replaced.Body, &after)
	if !sameJSON(before["clientEncryptionPolicy"], after["clientEncryptionPolicy"]) {
		t.Errorf("a replace without a policy changed it: %v → %v", before["clientEncryptionPolicy"], after["clientEncryptionPolicy"])
	}
	if _, err := e.ReplaceContainer(ctx, "pdb", "c", container("c", `{"includedPaths":[`+path("/b", "Randomized")+`],"policyFormatVersion":2}`), ""); statusOf(err) != 400 {
		t.Errorf("a replace that changes the policy: %v, want 400", err)
	}
}
