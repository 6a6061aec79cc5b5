package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server/h1serve"
	"github.com/orrery-db/orrery/storage/memory"
)

const readOnlyKey = "cmVhZC1vbmx5LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY3OA=="

// rawClient speaks the REST API directly, to send what an SDK never would.
type rawClient struct {
	t   *testing.T
	url string
	key string
}

func newTestServer(t *testing.T) *rawClient {
	t.Helper()
	return newLimitedServer(t, Limits{})
}

// newLimitedServer serves a database "db" with a container "c" (partition
// key /pk) through the http.Server that HTTPServer builds for limits, served
// by h1serve on Server.Listener as the API port is.
func newLimitedServer(t *testing.T, limits Limits) *rawClient {
	ctx := t.Context()
	t.Helper()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey, ReadOnly: readOnlyKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := h1serve.New(srv.HTTPServer())
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(srv.Listener(ln))
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	c := &rawClient{t: t, url: "http://" + ln.Addr().String(), key: EmulatorKey}
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	return c
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a signed request; headers may override anything, including auth.
func (c *rawClient) do(method, path, body string, headers map[string]string) response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	segs := splitPath(req.URL.Path)
	rtype, rlink := signingScope(segs)
	auth, err := Sign(c.key, method, rtype, rlink, date)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-version", "2020-11-05")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

func (c *rawClient) must(method, path, body string, headers map[string]string, status int) response {
	c.t.Helper()
	r := c.do(method, path, body, headers)
	if r.status != status {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	return r
}

func pk(v string) map[string]string { return map[string]string{"x-ms-documentdb-partitionkey": v} }

func TestBadInputGetsCosmosErrorsAndLeavesNoTrace(t *testing.T) {
	c := newTestServer(t)
	big := `{"id":"big","pk":"a","blob":"` + strings.Repeat("x", 2*1024*1024) + `"}`
	longID := strings.Repeat("i", 1024)
	longPK := strings.Repeat("p", 2049)
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		headers  map[string]string
		status   int
		code     string
		contains string
	}{
		{"malformed JSON", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"a"`, pk(`["a"]`), 400, "BadRequest", "JSON"},
		{"body is an array", "POST", "/dbs/db/colls/c/docs", `[{"id":"x","pk":"a"}]`, pk(`["a"]`), 400, "BadRequest", "object"},
		{"body is a string", "POST", "/dbs/db/colls/c/docs", `"x"`, pk(`["a"]`), 400, "BadRequest", "object"},
		{"empty body", "POST", "/dbs/db/colls/c/docs", ``, pk(`["a"]`), 400, "BadRequest", "JSON"},
		{"missing id", "POST", "/dbs/db/colls/c/docs", `{"pk":"a"}`, pk(`["a"]`), 400, "BadRequest", "id"},
		{"id not a string", "POST", "/dbs/db/colls/c/docs", `{"id":5,"pk":"a"}`, pk(`["a"]`), 400, "BadRequest", "string"},
		{"id too long", "POST", "/dbs/db/colls/c/docs", `{"id":"` + longID + `","pk":"a"}`, pk(`["a"]`), 400, "BadRequest", "1023"},
		{"partition key value too long", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"` + longPK + `"}`, nil, 400, "BadRequest", "2048"},
		{"partition key mismatch", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"a"}`, pk(`["b"]`), 400, "BadRequest", "doesn't match"},
		{"partition key missing from the body", "POST", "/dbs/db/colls/c/docs", `{"id":"x"}`, pk(`["a"]`), 400, "BadRequest", "doesn't match"},
		{"partition key header not JSON", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"a"}`, pk(`a`), 400, "BadRequest", "JSON array"},
		{"partition key is an object", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":{"a":1}}`, nil, 400, "BadRequest", "partition key"},
		{"too many partition key components", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"a"}`, pk(`["a","b"]`), 400, "BadRequest", "doesn't match"},
		{"read without a partition key", "GET", "/dbs/db/colls/c/docs/x", ``, nil, 400, "BadRequest", "PartitionKey value must be supplied"},
		{"oversized item", "POST", "/dbs/db/colls/c/docs", big, pk(`["a"]`), 413, "RequestEntityTooLarge", "too large"},
		{"bad ttl", "POST", "/dbs/db/colls/c/docs", `{"id":"x","pk":"a","ttl":0}`, pk(`["a"]`), 400, "BadRequest", "ttl"},
		{"unknown route", "GET", "/dbs/db/nothing/here", ``, nil, 400, "BadRequest", "names nothing in the Azure Cosmos DB"},
		{"unknown top-level route", "GET", "/nope", ``, nil, 400, "BadRequest", "names nothing in the Azure Cosmos DB"},
		{"missing container", "GET", "/dbs/db/colls/none/docs/x", ``, pk(`["a"]`), 404, "NotFound", "does not exist"},
		{"missing database", "GET", "/dbs/none", ``, nil, 404, "NotFound", "does not exist"},
		{"method not allowed", "PATCH", "/dbs/db", `{}`, nil, 405, "MethodNotAllowed", "not allowed"},
		{"bad signature", "GET", "/dbs/db", ``, map[string]string{"Authorization": "type%3Dmaster%26ver%3D1.0%26sig%3DAAAA"}, 401, "Unauthorized", "payload"},
		{"no authorization", "GET", "/dbs/db", ``, map[string]string{"Authorization": ""}, 401, "Unauthorized", "authorization"},
		{"stale date", "GET", "/dbs", ``, map[string]string{"x-ms-date": time.Now().Add(-16 * time.Minute).UTC().Format(http.TimeFormat)}, 401, "Unauthorized", "not valid at the current time"},
		{"bad max item count", "GET", "/dbs/db/colls/c/docs", ``, map[string]string{"x-ms-max-item-count": "lots"}, 400, "BadRequest", "max-item-count"},
		{"container without partition key", "POST", "/dbs/db/colls", `{"id":"nopk"}`, nil, 400, "BadRequest", "partitionKey"},
		{"container with a bad defaultTtl", "POST", "/dbs/db/colls", `{"id":"t","partitionKey":{"paths":["/pk"]},"defaultTtl":0}`, nil, 400, "BadRequest", "defaultTtl"},
		{"database id with a slash", "POST", "/dbs", `{"id":"a/b"}`, nil, 400, "BadRequest", "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.do(tt.method, tt.path, tt.body, tt.headers)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			var e struct{ Code, Message string }
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatalf("error body is not JSON: %q", r.body)
			}
			if e.Code != tt.code || !strings.Contains(e.Message, tt.contains) {
				t.Fatalf("error body %s, want code %s and a message containing %q", r.body, tt.code, tt.contains)
			}
			if r.header.Get("Content-Type") != "application/json" || r.header.Get("x-ms-activity-id") == "" {
				t.Fatalf("headers %v", r.header)
			}
		})
	}
	// Nothing was stored by any of it.
	r := c.must("GET", "/dbs/db/colls/c/docs", "", nil, 200)
	var feed struct {
		Documents []json.RawMessage
		Count     int `json:"_count"`
	}
	if err := json.Unmarshal(r.body, &feed); err != nil || feed.Count != 0 {
		t.Fatalf("items after bad requests: %s", r.body)
	}
	r = c.must("GET", "/dbs/db/colls", "", nil, 200)
	if !bytes.Contains(r.body, []byte(`"_count":1`)) {
		t.Fatalf("containers after bad requests: %s", r.body)
	}
}

func TestReadOnlyKeyReadsButCannotWrite(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	ro := &rawClient{t: t, url: c.url, key: readOnlyKey}
	ro.must("GET", "/dbs/db/colls/c/docs/1", "", pk(`["a"]`), 200)
	ro.must("POST", "/dbs/db/colls/c/docs", `{"query":"SELECT * FROM c"}`, map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-query-enablecrosspartition": "true"}, 200)
	r := ro.must("POST", "/dbs/db/colls/c/docs", `{"id":"2","pk":"a"}`, pk(`["a"]`), 403)
	if !bytes.Contains(r.body, []byte(`"Forbidden"`)) {
		t.Fatalf("body %s", r.body)
	}
	ro.must("DELETE", "/dbs/db", "", nil, 403)
	wrong := &rawClient{t: t, url: c.url, key: "d3Jvbmcta2V5"}
	wrong.must("GET", "/dbs", "", nil, 401)
}

func TestIfNoneMatchAnswers304(t *testing.T) {
	c := newTestServer(t)
	r := c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	etag := r.header.Get("etag")
	h := pk(`["a"]`)
	h["If-None-Match"] = etag
	c.must("GET", "/dbs/db/colls/c/docs/1", "", h, 304)
	c.must("PUT", "/dbs/db/colls/c/docs/1", `{"id":"1","pk":"a","v":2}`, pk(`["a"]`), 200)
	r = c.must("GET", "/dbs/db/colls/c/docs/1", "", h, 200)
	if r.header.Get("etag") == etag {
		t.Fatal("etag unchanged after replace")
	}
	// Databases and containers honour it too.
	r = c.must("GET", "/dbs/db", "", nil, 200)
	c.must("GET", "/dbs/db", "", map[string]string{"If-None-Match": r.header.Get("etag")}, 304)
}

func TestSignatureVectors(t *testing.T) {
	// Computed independently with the SDKs (see the wire-protocol notes).
	const date = "Tue, 01 Apr 2025 12:00:00 GMT"
	tests := []struct{ verb, rtype, rlink, want string }{
		{"GET", "", "", "type%3Dmaster%26ver%3D1.0%26sig%3DWkFgO9PG0jZ156dFGtn90LdXcD%2BTWa%2B2KcVXY4GjLHs%3D"},
		{"GET", "dbs", "dbs/testdb", "type%3Dmaster%26ver%3D1.0%26sig%3DkHd5M%2B5cCa5eVI5uo3CVvt8RSil6eaptxJ2qjPJKSg8%3D"},
		{"POST", "docs", "dbs/testdb/colls/items", "type%3Dmaster%26ver%3D1.0%26sig%3D%2BTqI7geFPKaAZ3oyXXtH4WTIKbIHrXhuIP3C%2FQrkRgM%3D"},
		{"GET", "docs", "dbs/testdb/colls/items/docs/a b", "type%3Dmaster%26ver%3D1.0%26sig%3DJzONW6hJYe4rJSeuIhNuMojPoMUf0CYew3hP3BKjwnM%3D"},
	}
	for _, tt := range tests {
		got, err := Sign(EmulatorKey, tt.verb, tt.rtype, tt.rlink, date)
		if err != nil || got != tt.want {
			t.Errorf("Sign(%s %s %s) = %s, want %s", tt.verb, tt.rtype, tt.rlink, got, tt.want)
		}
	}
	scopes := []struct {
		path        string
		rtype, link string
	}{
		{"/", "", ""},
		{"/dbs", "dbs", ""},
		{"/dbs/db1/colls/c1/docs", "docs", "dbs/db1/colls/c1"},
		{"/dbs/db1/colls/c1/docs/1", "docs", "dbs/db1/colls/c1/docs/1"},
		{"/offers/AbCd/", "offers", "abcd"},
		{"/dbs/d/colls/c/sprocs/sp1", "sprocs", "dbs/d/colls/c/sprocs/sp1"},
	}
	for _, s := range scopes {
		rt, rl := signingScope(splitPath(s.path))
		if rt != s.rtype || rl != s.link {
			t.Errorf("signingScope(%s) = %q %q, want %q %q", s.path, rt, rl, s.rtype, s.link)
		}
	}
	// The Python SDK signs a RID link by the RID it names (its parent's, for
	// a feed), lower-cased.
	rids := map[string]string{
		"/dbs/AyY-tg==/colls":                                             "ayy-tg==",
		"/dbs/AyY-tg==/colls/AyY-tkuYb5M=/":                               "ayy-tkuyb5m=",
		"/dbs/AyY-tg==/colls/AyY-tkuYb5M=/docs/":                          "ayy-tkuyb5m=",
		"/dbs/AyY-tg==/colls/AyY-tkuYb5M=/docs/AyY-tkuYb5MBAAAAAAAAAA==/": "ayy-tkuyb5mbaaaaaaaaaa==",
		"/dbs/mydb/colls/c":                                               "",
		"/dbs/mydb/colls/c/docs/abcd":                                     "",
		"/offers/AbCd":                                                    "",
		"/dbs/AyY-tg==\n/colls":                                           "ayy-tg==\n",
		"/dbs/AyY-\ntg==/colls":                                           "ayy-\ntg==",
		"/dbs/AyY-tg=\n/colls":                                            "",
		"/":                                                               "",
	}
	for path, want := range rids {
		if got := ridScope(splitPath(path)); got != want {
			t.Errorf("ridScope(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestAccountNamesTheEndpointTheClientUsed(t *testing.T) {
	c := newTestServer(t)
	r := c.must("GET", "/", "", nil, 200)
	var acct struct {
		ID                string `json:"id"`
		WritableLocations []struct {
			Endpoint string `json:"databaseAccountEndpoint"`
		} `json:"writableLocations"`
		Consistency struct {
			Level string `json:"defaultConsistencyLevel"`
		} `json:"userConsistencyPolicy"`
	}
	if err := json.Unmarshal(r.body, &acct); err != nil {
		t.Fatal(err)
	}
	// Not "localhost": with that id the JavaScript SDK ignores the locations
	// and re-reads the account before every operation.
	if acct.ID == "localhost" || len(acct.WritableLocations) != 1 || acct.WritableLocations[0].Endpoint != c.url+"/" {
		t.Fatalf("account %s, want id != localhost and the endpoint %s/", r.body, c.url)
	}
	if acct.Consistency.Level != "Session" {
		t.Fatalf("consistency %q", acct.Consistency.Level)
	}
}

func TestScriptResourcesCRUD(t *testing.T) {
	c := newTestServer(t)
	base := "/dbs/db/colls/c/"
	for _, kind := range []string{"sprocs", "triggers", "udfs"} {
		body := `{"id":"s1","body":"function(){}"}`
		if kind == "triggers" {
			body = `{"id":"s1","body":"function(){}","triggerType":"Pre","triggerOperation":"Create"}`
		}
		r := c.must("POST", base+kind, body, nil, 201)
		var created map[string]any
		json.Unmarshal(r.body, &created)
		for _, p := range []string{"_rid", "_self", "_etag", "_ts"} {
			if created[p] == nil {
				t.Fatalf("%s: created script lacks %s: %s", kind, p, r.body)
			}
		}
		c.must("POST", base+kind, body, nil, 409)
		c.must("GET", base+kind+"/s1", "", nil, 200)
		c.must("GET", base+kind+"/"+created["_rid"].(string), "", nil, 200)
		list := c.must("GET", base+kind, "", nil, 200)
		if !bytes.Contains(list.body, []byte(`"_count":1`)) {
			t.Fatalf("%s list: %s", kind, list.body)
		}
		c.must("PUT", base+kind+"/s1", strings.Replace(body, "function(){}", "function(){ return 1; }", 1), map[string]string{"If-Match": r.header.Get("etag")}, 200)
		c.must("PUT", base+kind+"/s1", body, map[string]string{"If-Match": r.header.Get("etag")}, 412)
		c.must("DELETE", base+kind+"/s1", "", nil, 204)
		c.must("GET", base+kind+"/s1", "", nil, 404)
	}
	c.must("POST", base+"triggers", `{"id":"t","body":"function(){}","triggerType":"Sideways","triggerOperation":"All"}`, nil, 400)
	c.must("POST", base+"sprocs", `{"id":"nobody"}`, nil, 400)
}
