package server

import (
	"encoding/json"
	"strings"
	"testing"
)

const testEncryptionKey = `{"id":"cek","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AAECAw==",` +
	`"keyWrapMetadata":{"type":"TEST","name":"kek","value":"v1","algorithm":"RSA-OAEP"}}`

// TestClientEncryptionKeysAreServedAsTheServiceServesThem: created (201,
// 409 again), read (304 at its ETag), listed and queried in the
// ClientEncryptionKeys feed, rewrapped under If-Match; no delete (405).
func TestClientEncryptionKeysAreServedAsTheServiceServesThem(t *testing.T) {
	c := newTestServer(t)
	r := c.must("POST", "/dbs/db/clientencryptionkeys", testEncryptionKey, nil, 201)
	var key map[string]any
	if err := json.Unmarshal(r.body, &key); err != nil || key["_etag"] == nil || !strings.HasSuffix(key["_self"].(string), "/clientencryptionkeys/"+key["_rid"].(string)+"/") {
		t.Fatalf("created key %s (%v)", r.body, err)
	}
	c.must("POST", "/dbs/db/clientencryptionkeys", testEncryptionKey, nil, 409)
	c.must("GET", "/dbs/db/clientencryptionkeys/cek", "", nil, 200)
	c.must("GET", "/dbs/db/clientencryptionkeys/cek", "", map[string]string{"If-None-Match": key["_etag"].(string)}, 304)
	c.must("GET", "/dbs/db/clientencryptionkeys/nope", "", nil, 404)
	c.must("GET", "/dbs/nodb/clientencryptionkeys/cek", "", nil, 404)
	feed := c.must("GET", "/dbs/db/clientencryptionkeys", "", nil, 200)
	if !strings.Contains(string(feed.body), `"ClientEncryptionKeys":[{`) || !strings.Contains(string(feed.body), `"_count":1`) {
		t.Fatalf("feed %s", feed.body)
	}
	query := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true"}
	q := c.must("POST", "/dbs/db/clientencryptionkeys", `{"query":"SELECT * FROM c WHERE c.id = @id","parameters":[{"name":"@id","value":"cek"}]}`, query, 200)
	if !strings.Contains(string(q.body), `"id":"cek"`) {
		t.Fatalf("query %s", q.body)
	}
	rewrap := strings.Replace(testEncryptionKey, `"value":"v1"`, `"value":"v2"`, 1)
	c.must("PUT", "/dbs/db/clientencryptionkeys/cek", rewrap, map[string]string{"If-Match": `"stale"`}, 412)
	c.must("PUT", "/dbs/db/clientencryptionkeys/cek", rewrap, map[string]string{"If-Match": key["_etag"].(string)}, 200)
	c.must("DELETE", "/dbs/db/clientencryptionkeys/cek", "", nil, 405)
	c.must("POST", "/dbs/db/clientencryptionkeys", `{"id":"bad","encryptionAlgorithm":"AES"}`, nil, 400)
}

// TestResourceTokensReadButNeverWriteClientEncryptionKeys: a client granted
// one container of a database reads the database's keys, which it needs to
// decrypt, and cannot create or rewrap them (403); a token of another
// database reads none.
func TestResourceTokensReadButNeverWriteClientEncryptionKeys(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/clientencryptionkeys", testEncryptionKey, nil, 201)
	c.must("POST", "/dbs", `{"id":"db2"}`, nil, 201)
	c.must("POST", "/dbs/db2/colls", `{"id":"c2","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", "/dbs/db/users", `{"id":"u"}`, nil, 201)
	all, _ := c.permissionToken("u", `{"id":"all","permissionMode":"All","resource":"dbs/db/colls/c","resourcePartitionKey":["a"]}`, nil)
	c.must("POST", "/dbs/db2/users", `{"id":"u2"}`, nil, 201)
	r := c.must("POST", "/dbs/db2/users/u2/permissions", `{"id":"other","permissionMode":"All","resource":"dbs/db2/colls/c2"}`, nil, 201)
	var other struct {
		Token string `json:"_token"`
	}
	_ = json.Unmarshal(r.body, &other)
	c.must("GET", "/dbs/db/clientencryptionkeys/cek", "", withToken(all, nil), 200)
	c.must("GET", "/dbs/db/clientencryptionkeys", "", withToken(all, nil), 200)
	c.must("POST", "/dbs/db/clientencryptionkeys", strings.Replace(testEncryptionKey, `"id":"cek"`, `"id":"cek2"`, 1), withToken(all, nil), 403)
	c.must("PUT", "/dbs/db/clientencryptionkeys/cek", testEncryptionKey, withToken(all, nil), 403)
	c.must("GET", "/dbs/db/clientencryptionkeys/cek", "", withToken(other.Token, nil), 403)
	ro := &rawClient{t: t, url: c.url, key: readOnlyKey}
	ro.must("GET", "/dbs/db/clientencryptionkeys/cek", "", nil, 200)
	ro.must("PUT", "/dbs/db/clientencryptionkeys/cek", testEncryptionKey, nil, 403)
}

// TestARecreatedContainerIsNotTheIntendedOne: an item request that names,
// in x-ms-cosmos-intended-collection-rid, the container deleted and made
// again under its name is a 400 with substatus 1024; the new RID is served.
func TestARecreatedContainerIsNotTheIntendedOne(t *testing.T) {
	c := newTestServer(t)
	ridOf := func() string {
		var p struct {
			RID string `json:"_rid"`
		}
		_ = json.Unmarshal(c.must("GET", "/dbs/db/colls/c", "", nil, 200).body, &p)
		return p.RID
	}
	old := ridOf()
	intended := func(rid string) map[string]string {
		return map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-cosmos-intended-collection-rid": rid}
	}
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, intended(old), 201)
	c.must("DELETE", "/dbs/db/colls/c", "", nil, 204)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	r := c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, intended(old), 400)
	if r.header.Get("x-ms-substatus") != "1024" {
		t.Fatalf("substatus %q, want 1024: %s", r.header.Get("x-ms-substatus"), r.body)
	}
	c.must("GET", "/dbs/db/colls/c/docs/1", "", intended(old), 400)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, intended(ridOf()), 201)
}
