package server

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// permissionToken creates a permission through the REST API and returns its
// _token and _rid.
func (c *rawClient) permissionToken(user, body string, headers map[string]string) (token, rid string) {
	c.t.Helper()
	r := c.must("POST", "/dbs/db/users/"+user+"/permissions", body, headers, 201)
	var p struct {
		Token string `json:"_token"`
		RID   string `json:"_rid"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || !strings.HasPrefix(p.Token, "type=resource&ver=1.0&sig=") {
		c.t.Fatalf("permission %s: no resource token (%v)", r.body, err)
	}
	return p.Token, p.RID
}

// withToken returns headers that authorize a request with a resource token
// as the JavaScript SDK sends it (URL-encoded), plus extra.
func withToken(token string, extra map[string]string) map[string]string {
	h := map[string]string{"Authorization": url.QueryEscape(token), "x-ms-date": ""}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func TestUsersAndPermissionsCRUD(t *testing.T) {
	c := newTestServer(t)
	r := c.must("POST", "/dbs/db/users", `{"id":"alice"}`, nil, 201)
	var u map[string]any
	json.Unmarshal(r.body, &u)
	if u["_permissions"] != "permissions/" || !strings.HasPrefix(u["_self"].(string), "dbs/") || u["_etag"] == nil {
		t.Fatalf("user %s", r.body)
	}
	c.must("POST", "/dbs/db/users", `{"id":"alice"}`, nil, 409)
	c.must("GET", "/dbs/db/users/bob", "", nil, 404)
	c.must("GET", "/dbs/db/users/"+u["_rid"].(string), "", nil, 200)
	c.must("PUT", "/dbs/db/users/alice", `{"id":"alice"}`, map[string]string{"If-Match": `"stale"`}, 412)
	c.must("POST", "/dbs/db/users", `{"id":"alice","note":1}`, map[string]string{"x-ms-documentdb-is-upsert": "true"}, 200)
	list := c.must("GET", "/dbs/db/users", "", nil, 200)
	if !strings.Contains(string(list.body), `"Users":[{`) || !strings.Contains(string(list.body), `"_count":1`) {
		t.Fatalf("users feed %s", list.body)
	}

	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		status     int
	}{
		{"bad mode", `{"id":"p","permissionMode":"Write","resource":"dbs/db/colls/c"}`, nil, 400},
		{"no resource", `{"id":"p","permissionMode":"Read"}`, nil, 400},
		{"bad link", `{"id":"p","permissionMode":"Read","resource":"colls/c"}`, nil, 400},
		{"scalar partition key", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c","resourcePartitionKey":"a"}`, nil, 400},
		{"expiry too long", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`, map[string]string{"x-ms-documentdb-expiry-seconds": "18001"}, 400},
		{"expiry not a number", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`, map[string]string{"x-ms-documentdb-expiry-seconds": "soon"}, 400},
		{"no such user", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := "alice"
			if tc.status == 404 {
				user = "nobody"
			}
			r := c.must("POST", "/dbs/db/users/"+user+"/permissions", tc.body, tc.headers, tc.status)
			if !strings.Contains(string(r.body), `"code":`) {
				t.Fatalf("not a Cosmos error body: %s", r.body)
			}
		})
	}
	c.permissionToken("alice", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil)
	ro := &rawClient{t: t, url: c.url, key: readOnlyKey}
	ro.must("GET", "/dbs/db/users/alice", "", nil, 200)
	ro.must("GET", "/dbs/db/users/alice/permissions/p", "", nil, 403)
	ro.must("GET", "/dbs/db/users/alice/permissions", "", nil, 403)
	c.must("POST", "/dbs/db/users/alice/permissions", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil, 409)
	c.must("POST", "/dbs/db/users/alice/permissions", `{"id":"q","permissionMode":"All","resource":"/dbs/db/colls/c/"}`, nil, 409)
	feed := c.must("GET", "/dbs/db/users/alice/permissions", "", nil, 200)
	if !strings.Contains(string(feed.body), `"Permissions":[{`) || !strings.Contains(string(feed.body), `"_token":"type=resource`) {
		t.Fatalf("permissions feed %s", feed.body)
	}
	c.must("PUT", "/dbs/db/users/alice/permissions/p", `{"id":"p","permissionMode":"All","resource":"dbs/db/colls/c"}`, nil, 200)
	c.must("DELETE", "/dbs/db/users/alice", "", nil, 204)
	c.must("GET", "/dbs/db/users/alice/permissions/p", "", nil, 404)
}

func TestResourceTokenScope(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls", `{"id":"other","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"2","pk":"b"}`, pk(`["b"]`), 201)
	c.must("POST", "/dbs/db/users", `{"id":"u"}`, nil, 201)
	read, _ := c.permissionToken("u", `{"id":"read","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil)
	coll := c.must("GET", "/dbs/db/colls/c", "", nil, 200)
	var cp struct {
		Self string `json:"_self"`
	}
	json.Unmarshal(coll.body, &cp)
	byRID, _ := c.permissionToken("u", `{"id":"rid","permissionMode":"All","resource":"`+cp.Self+`docs/2"}`, nil)
	onlyA, _ := c.permissionToken("u", `{"id":"pka","permissionMode":"All","resource":"dbs/db/colls/other","resourcePartitionKey":["a"]}`, nil)
	c.must("POST", "/dbs/db/colls/other/docs", `{"id":"1","pk":"b"}`, pk(`["b"]`), 201)

	query := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-query-enablecrosspartition": "true"}
	for _, tc := range []struct {
		name, method, path, body, token string
		headers                         map[string]string
		status                          int
	}{
		{"read item", "GET", "/dbs/db/colls/c/docs/1", "", read, pk(`["a"]`), 200},
		{"read container", "GET", "/dbs/db/colls/c", "", read, nil, 200},
		{"read account", "GET", "/", "", read, nil, 200},
		{"query", "POST", "/dbs/db/colls/c/docs", `{"query":"SELECT * FROM c"}`, read, query, 200},
		{"write with read", "POST", "/dbs/db/colls/c/docs", `{"id":"3","pk":"a"}`, read, pk(`["a"]`), 403},
		{"delete with read", "DELETE", "/dbs/db/colls/c/docs/1", "", read, pk(`["a"]`), 403},
		{"wrong container", "GET", "/dbs/db/colls/other/docs/1", "", read, pk(`["b"]`), 403},
		{"database feed", "GET", "/dbs", "", read, nil, 403},
		{"container feed", "GET", "/dbs/db/colls", "", read, nil, 403},
		{"users", "GET", "/dbs/db/users", "", read, nil, 403},
		{"item by name, granted by RID link", "PUT", "/dbs/db/colls/c/docs/2", `{"id":"2","pk":"b","v":1}`, byRID, pk(`["b"]`), 200},
		{"sibling item", "GET", "/dbs/db/colls/c/docs/1", "", byRID, pk(`["a"]`), 403},
		{"granted partition", "POST", "/dbs/db/colls/other/docs", `{"id":"9","pk":"a"}`, onlyA, pk(`["a"]`), 201},
		{"other partition", "GET", "/dbs/db/colls/other/docs/1", "", onlyA, pk(`["b"]`), 403},
		{"no partition key", "GET", "/dbs/db/colls/other/docs", "", onlyA, nil, 403},
		{"pkranges without partition key", "GET", "/dbs/db/colls/other/pkranges", "", onlyA, nil, 200},
		{"tampered signature", "GET", "/dbs/db/colls/c/docs/1", "", tamper(read), pk(`["a"]`), 401},
		{"foreign type", "GET", "/dbs/db/colls/c/docs/1", "", "type=aad&ver=1.0&sig=x", pk(`["a"]`), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.must(tc.method, tc.path, tc.body, withToken(tc.token, tc.headers), tc.status)
			if tc.status >= 400 && !strings.Contains(string(r.body), `"code":`) {
				t.Fatalf("not a Cosmos error body: %s", r.body)
			}
		})
	}

	c.must("DELETE", "/dbs/db/users/u/permissions/read", "", nil, 204)
	c.must("GET", "/dbs/db/colls/c/docs/1", "", withToken(read, pk(`["a"]`)), 401)
	c.must("DELETE", "/dbs/db", "", nil, 204)
	c.must("POST", "/dbs/db/colls/other/docs", `{"id":"8","pk":"a"}`, withToken(onlyA, pk(`["a"]`)), 401)
}

// tamper flips one bit of a token's signature.
func tamper(token string) string {
	sig := strings.TrimPrefix(token, resourceTokenPrefix)
	b, _ := base64.RawURLEncoding.DecodeString(sig)
	b[len(b)-1] ^= 1
	return resourceTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func TestResourceTokenVerification(t *testing.T) {
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newKeyRing(Keys{Master: readOnlyKey})
	const rid = "AAAAAQAAAAIAAAAAAAAAAw=="
	now := time.Unix(1_800_000_000, 0)
	valid, err := ring.mintResourceToken(rid, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.mintResourceToken(rid, now.Add(time.Hour))
	sigOf := func(tok string) string { return strings.TrimPrefix(tok, resourceTokenPrefix) }
	// A token whose expiry was moved later keeps its old signature.
	extended := func() string {
		b, _ := base64.RawURLEncoding.DecodeString(sigOf(valid))
		b[tokenPayloadLen-1]++
		return base64.RawURLEncoding.EncodeToString(b)
	}()
	for _, tc := range []struct {
		name string
		sig  string
		at   time.Time
		ok   bool
	}{
		{"valid", sigOf(valid), now, true},
		{"just before expiry", sigOf(valid), now.Add(time.Hour - time.Second), true},
		{"at expiry", sigOf(valid), now.Add(time.Hour), false},
		{"other account's key", sigOf(foreign), now, false},
		{"tampered signature", sigOf(tamper(valid)), now, false},
		{"extended expiry", extended, now, false},
		{"truncated", sigOf(valid)[:20], now, false},
		{"not base64", "!!!!", now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := ring.verifyResourceToken([]byte(tc.sig), tc.at)
			if tc.ok != (err == nil) {
				t.Fatalf("verify: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && err.Status != 401 {
				t.Fatalf("status %d, want 401", err.Status)
			}
			if tc.ok && tok.permissionRID != rid {
				t.Fatalf("permission RID %q, want %q", tok.permissionRID, rid)
			}
		})
	}
}

// BenchmarkPointReadWithResourceToken is BenchmarkPointRead authorized by a
// resource token: the token's HMAC, the permission's lookup by RID and the
// scope check instead of the master-key signature.
func BenchmarkPointReadWithResourceToken(b *testing.B) {
	ctx := b.Context()
	hs, eng := benchServer(b)
	if _, err := eng.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: "c", Body: benchBody}); err != nil {
		b.Fatal(err)
	}
	if _, err := eng.CreateUser(ctx, "db", []byte(`{"id":"u"}`)); err != nil {
		b.Fatal(err)
	}
	p, err := eng.CreatePermission(ctx, "db", "u", []byte(`{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`))
	if err != nil {
		b.Fatal(err)
	}
	ring, _ := newKeyRing(Keys{Master: EmulatorKey})
	token, err := ring.mintResourceToken(p.RID, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	req := signedRequest(b, hs.URL, "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", `["p"]`, nil)
	req.Header.Set("Authorization", url.QueryEscape(token))
	req.Header.Del("x-ms-date")
	client := hs.Client()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		do(b, client, req, 200)
	}
}

// TestUsersFeedBesideAUniqueKeyPolicy: a database whose container has a
// unique key policy and an item lists its users, before and after one is
// created (the feed once answered 500, the users' scan meeting the
// container's unique-key entries).
func TestUsersFeedBesideAUniqueKeyPolicy(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls", `{"id":"u","partitionKey":{"paths":["/pk"]},"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/email"]}]}}`, nil, 201)
	c.must("POST", "/dbs/db/colls/u/docs", `{"id":"1","pk":"p","email":"a@example.com"}`, map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}, 201)
	if list := c.must("GET", "/dbs/db/users", "", nil, 200); !strings.Contains(string(list.body), `"_count":0`) {
		t.Fatalf("users feed before any user: %s", list.body)
	}
	c.must("POST", "/dbs/db/users", `{"id":"alice"}`, nil, 201)
	if list := c.must("GET", "/dbs/db/users", "", nil, 200); !strings.Contains(string(list.body), `"_count":1`) {
		t.Fatalf("users feed: %s", list.body)
	}
}

// TestAResourceTokenIsCheckedAsDecodeStringAndSignRead: a token checked on
// the stack (decoded into a buffer, its MAC in the key's reused hash state,
// its permission's RID encoded in place) gives what decoding it with
// DecodeString, signing a fresh copy of its payload and encoding the RID
// with EncodeToString and ReplaceAll gave: the same RID, the same refusal,
// for tokens with line breaks (which the decoder skips), RIDs holding '/',
// longer, shorter and altered ones.
func TestAResourceTokenIsCheckedAsDecodeStringAndSignRead(t *testing.T) {
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	// reference is the check as it was written with allocating calls.
	reference := func(sig string) (string, bool) {
		b, err := base64.RawURLEncoding.DecodeString(sig)
		if err != nil || len(b) != tokenLen {
			return "", false
		}
		payload, mac := b[:tokenPayloadLen], b[tokenPayloadLen:]
		if !hmac.Equal(mac, ring.master.sign(resourceTokenDomain+string(payload))) {
			return "", false
		}
		if !now.Before(time.Unix(int64(binary.BigEndian.Uint64(payload[permissionRIDLen:])), 0)) {
			return "", false
		}
		return strings.ReplaceAll(base64.StdEncoding.EncodeToString(payload[:permissionRIDLen]), "/", "-"), true
	}
	var sigs []string
	for _, rid := range []string{"AAAAAQAAAAIAAAAAAAAAAw==", "-----A--AAAAAAAAAAAA-w==", "ab-dAQ-0AAIA-AAAA+AAAw=="} {
		for _, expiry := range []time.Time{now.Add(time.Hour), now, now.Add(-time.Second)} {
			tok, err := ring.mintResourceToken(rid, expiry)
			if err != nil {
				t.Fatal(err)
			}
			sig := strings.TrimPrefix(tok, resourceTokenPrefix)
			sigs = append(sigs, sig, sig[:len(sig)-1], sig+"A", sig+"AA", "\r\n"+sig, sig[:10]+"\n"+sig[10:]+"\r\n",
				strings.Repeat("\n", 40)+sig, sig[:30]+"!"+sig[31:], sig[:len(sig)-2]+"AB", sig+"=", "")
		}
	}
	for _, sig := range sigs {
		wantRID, wantOK := reference(sig)
		tok, aerr := ring.verifyResourceToken([]byte(sig), now)
		if wantOK != (aerr == nil) {
			t.Fatalf("token %q: verified %v (%v), want %v", sig, aerr == nil, aerr, wantOK)
		}
		if wantOK && tok.permissionRID != wantRID {
			t.Fatalf("token %q: permission RID %q, want %q", sig, tok.permissionRID, wantRID)
		}
	}
}

// TestAPermissionGrantsOnlyItsExactlyNamedModeAndResource: a permission's
// body may carry other properties, which are stored with it; those whose
// names differ from permissionMode, resource and resourcePartitionKey only
// in case (or a repeated name, the last of which is kept) grant nothing:
// the token of a Read permission on one container, stored beside
// "PermissionMode":"All" and "Resource":"dbs/db", reads that container
// and nothing else, writes nothing; a token altered, minted under another
// key, or expired is refused; replacing the permission moves its grant.
func TestAPermissionGrantsOnlyItsExactlyNamedModeAndResource(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls", `{"id":"other","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	c.must("POST", "/dbs/db/colls/other/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	c.must("POST", "/dbs/db/users", `{"id":"u"}`, nil, 201)
	token, rid := c.permissionToken("u", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c",`+
		`"PermissionMode":"All","PERMISSIONMODE":"All","permissionmode":"All","resourcepartitionkey":["b"],"Resource":"dbs/db","RESOURCE":"dbs/db/colls/other",`+
		`"ResourcePartitionKey":["b"],"x":{"resource":"dbs/db","permissionMode":"All"}}`, nil)
	stored := c.must("GET", "/dbs/db/users/u/permissions/p", "", nil, 200)
	if !strings.Contains(string(stored.body), `"Resource":"dbs/db"`) {
		t.Fatalf("the extra properties were not stored: %s", stored.body)
	}
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	foreignRing, _ := newKeyRing(Keys{Master: readOnlyKey})
	foreign, _ := foreignRing.mintResourceToken(rid, time.Now().Add(time.Hour))
	expired, _ := ring.mintResourceToken(rid, time.Now().Add(-time.Second))
	for _, tc := range []struct {
		name, method, path, body, token string
		status                          int
	}{
		{"read the granted container's item", "GET", "/dbs/db/colls/c/docs/1", "", token, 200},
		{"write in the granted container", "POST", "/dbs/db/colls/c/docs", `{"id":"2","pk":"a"}`, token, 403},
		{"delete in the granted container", "DELETE", "/dbs/db/colls/c/docs/1", "", token, 403},
		{"read another container", "GET", "/dbs/db/colls/other/docs/1", "", token, 403},
		{"write another container", "POST", "/dbs/db/colls/other/docs", `{"id":"2","pk":"a"}`, token, 403},
		{"read the database's containers", "GET", "/dbs/db/colls", "", token, 403},
		{"tampered", "GET", "/dbs/db/colls/c/docs/1", "", tamper(token), 401},
		{"minted under another key", "GET", "/dbs/db/colls/c/docs/1", "", foreign, 401},
		{"expired", "GET", "/dbs/db/colls/c/docs/1", "", expired, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.must(tc.method, tc.path, tc.body, withToken(tc.token, pk(`["a"]`)), tc.status)
			if tc.status >= 400 && !strings.Contains(string(r.body), `"code":`) {
				t.Fatalf("not a Cosmos error body: %s", r.body)
			}
		})
	}
	// Replaced, with the case variants the other way round: the grant is
	// the exactly named properties', now All on the other container.
	c.must("PUT", "/dbs/db/users/u/permissions/p", `{"id":"p","Resource":"dbs/db/colls/c","permissionMode":"All",`+
		`"resource":"dbs/db/colls/other","PermissionMode":"Read","permissionmode":"Read"}`, nil, 200)
	c.must("GET", "/dbs/db/colls/c/docs/1", "", withToken(token, pk(`["a"]`)), 403)
	c.must("POST", "/dbs/db/colls/other/docs", `{"id":"3","pk":"a"}`, withToken(token, pk(`["a"]`)), 201)
}
