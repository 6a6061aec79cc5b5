package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// errorOf decodes a Cosmos error body.
func errorOf(t *testing.T, r response) (code, message string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body is not JSON: %q", r.body)
	}
	return e.Code, e.Message
}

// A path of no shape the REST API has is a 400 that says so, also without
// (or with a wrong) signature: never a 401 that hides it, nor a 404 a client
// takes for a missing resource.
func TestUnknownPathsAnswer400BeforeAuthentication(t *testing.T) {
	c := newTestServer(t)
	for _, path := range []string{"/nope", "/dbs/db/nothing/here", "/dbs/db/colls/c/docs/x/y/z", "/dbs/db/colls/c/unknownfeed"} {
		for _, h := range []map[string]string{nil, {"Authorization": ""}, {"Authorization": "type%3Dmaster%26ver%3D1.0%26sig%3DAAAA"}} {
			r := c.do("GET", path, "", h)
			code, msg := errorOf(t, r)
			if r.status != 400 || code != "BadRequest" || !strings.Contains(msg, path) || !strings.Contains(msg, "names nothing") {
				t.Fatalf("GET %s (%v): %d %s", path, h, r.status, r.body)
			}
			if r.header.Get("x-ms-activity-id") == "" || r.header.Get("x-ms-request-charge") == "" {
				t.Fatalf("GET %s: headers %v", path, r.header)
			}
		}
	}
}

// What the service has and Orrery does not serve is a 400 naming it, once
// the request is authenticated.
func TestUnsupportedResourcesAnswer400NamingThem(t *testing.T) {
	c := newTestServer(t)
	tests := []struct{ method, path, names string }{
		{"GET", "/dbs/db/colls/c/docs/x/attachments", "attachments"},
	}
	for _, tc := range tests {
		r := c.must(tc.method, tc.path, "", pk(`["a"]`), 400)
		if code, msg := errorOf(t, r); code != "BadRequest" || !strings.Contains(msg, "Orrery does not support the "+tc.names) && !strings.Contains(msg, "Orrery does not support "+tc.names) {
			t.Fatalf("%s %s: %s", tc.method, tc.path, r.body)
		}
	}
	// Unsigned, the same paths are refused as any other request.
	c.must("GET", "/dbs/db/colls/c/docs/x/attachments", "", map[string]string{"Authorization": ""}, 401)
}

// The conflicts feed is served as an account with one write region serves
// it: empty, listed or queried, and no conflict to read or delete.
func TestConflictsFeedIsEmptyAsInOneWriteRegion(t *testing.T) {
	c := newTestServer(t)
	for _, r := range []response{
		c.must("GET", "/dbs/db/colls/c/conflicts", "", nil, 200),
		c.must("POST", "/dbs/db/colls/c/conflicts", `{"query":"SELECT * FROM c"}`, map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true"}, 200),
	} {
		var feed struct {
			Conflicts []json.RawMessage
			Count     int `json:"_count"`
		}
		if err := json.Unmarshal(r.body, &feed); err != nil || feed.Conflicts == nil || len(feed.Conflicts) != 0 || feed.Count != 0 {
			t.Fatalf("conflicts feed: %s", r.body)
		}
	}
	c.must("POST", "/dbs/db/colls/c/conflicts", `{"query":"SELECT FROM"}`, map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true"}, 400)
	c.must("GET", "/dbs/db/colls/c/conflicts/x", "", nil, 404)
	c.must("DELETE", "/dbs/db/colls/c/conflicts/x", "", nil, 404)
	c.must("GET", "/dbs/db/colls/missing/conflicts", "", nil, 404)
	c.must("GET", "/dbs/db/colls/c/conflicts", "", map[string]string{"Authorization": ""}, 401)
}

// A body that is not valid UTF-8 is refused with 400 and stores nothing:
// stored, it would break every SDK's read and query of its partition.
func TestInvalidUTF8BodiesAreRefusedAndStoreNothing(t *testing.T) {
	c := newTestServer(t)
	bad := "{\"id\":\"u\",\"pk\":\"a\",\"name\":\"caf\xe9\"}"
	for _, tc := range []struct {
		method, path string
		headers      map[string]string
	}{
		{"POST", "/dbs/db/colls/c/docs", pk(`["a"]`)},
		{"POST", "/dbs/db/colls/c/docs", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-documentdb-is-upsert": "true"}},
		{"PUT", "/dbs/db/colls/c/docs/u", pk(`["a"]`)},
	} {
		r := c.must(tc.method, tc.path, bad, tc.headers, 400)
		if code, msg := errorOf(t, r); code != "BadRequest" || !strings.Contains(msg, "not valid UTF-8 (byte 30 of 33)") {
			t.Fatalf("%s %s: %s", tc.method, tc.path, r.body)
		}
	}
	c.must("GET", "/dbs/db/colls/c/docs/u", "", pk(`["a"]`), 404)
	// Valid multi-byte UTF-8 is stored as sent.
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"u","pk":"a","name":"café"}`, pk(`["a"]`), 201)
	r := c.must("PATCH", "/dbs/db/colls/c/docs/u", "{\"operations\":[{\"op\":\"set\",\"path\":\"/name\",\"value\":\"\xff\"}]}", pk(`["a"]`), 400)
	if _, msg := errorOf(t, r); !strings.Contains(msg, "UTF-8") {
		t.Fatalf("patch: %s", r.body)
	}
	r = c.must("GET", "/dbs/db/colls/c/docs/u", "", pk(`["a"]`), 200)
	if !strings.Contains(string(r.body), `"name":"café"`) {
		t.Fatalf("item after refused patch: %s", r.body)
	}
}

// The service's gateway creates items whose id ends with whitespace but
// answers 401 to reads, replaces and deletes addressed to them; Orrery
// answers the same, with a message that says why. Ids holding a tab,
// carriage return or line feed are refused in front of the gateway with the
// HTTP front end's page (TestControlCharacterInPathIsRefusedWithTheFrontEndsPage).
func TestItemIDsTheGatewayCannotAddressAnswerAsTheGateway(t *testing.T) {
	c := newTestServer(t)
	for _, tc := range []struct {
		id     string
		status int
		says   string
	}{
		{"Test ", 401, "ends with whitespace"},
		{"Test   ", 401, "ends with whitespace"},
	} {
		body, _ := json.Marshal(map[string]string{"id": tc.id, "pk": "a"})
		c.must("POST", "/dbs/db/colls/c/docs", string(body), pk(`["a"]`), 201)
		path := "/dbs/db/colls/c/docs/" + escapePathSegment(tc.id)
		for _, m := range []string{"GET", "PUT", "PATCH", "DELETE"} {
			r := c.must(m, path, string(body), pk(`["a"]`), tc.status)
			if _, msg := errorOf(t, r); !strings.Contains(msg, tc.says) {
				t.Fatalf("%s %q: %s", m, tc.id, r.body)
			}
		}
	}
	for _, id := range []string{"With\tTab", "With\nLineFeed", "With\rReturn"} {
		body, _ := json.Marshal(map[string]string{"id": id, "pk": "a"})
		c.must("POST", "/dbs/db/colls/c/docs", string(body), pk(`["a"]`), 201)
	}
	// Leading and inner whitespace is addressable, as in the service.
	for _, id := range []string{" Test", "This is a test"} {
		body, _ := json.Marshal(map[string]string{"id": id, "pk": "a"})
		c.must("POST", "/dbs/db/colls/c/docs", string(body), pk(`["a"]`), 201)
		path := "/dbs/db/colls/c/docs/" + escapePathSegment(id)
		c.must("GET", path, "", pk(`["a"]`), 200)
		c.must("PUT", path, string(body), pk(`["a"]`), 200)
		c.must("DELETE", path, "", pk(`["a"]`), 204)
	}
	// A query finds the items that cannot be addressed.
	r := c.must("POST", "/dbs/db/colls/c/docs", `{"query":"SELECT VALUE COUNT(1) FROM c"}`,
		map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-partitionkey": `["a"]`}, 200)
	if !strings.Contains(string(r.body), `[5]`) {
		t.Fatalf("count: %s", r.body)
	}
}

func escapePathSegment(s string) string {
	r := strings.NewReplacer(" ", "%20", "\t", "%09", "\n", "%0A", "\r", "%0D")
	return r.Replace(s)
}

// Item operations that fail with 404, 409 or 412 carry the session token,
// as the service's do; every error carries the activity id and a charge.
func TestItemErrorsCarrySessionTokenActivityAndCharge(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)
	for _, tc := range []struct {
		method, path, body string
		headers            map[string]string
		status             int
	}{
		{"GET", "/dbs/db/colls/c/docs/missing", "", pk(`["a"]`), 404},
		{"DELETE", "/dbs/db/colls/c/docs/missing", "", pk(`["a"]`), 404},
		{"POST", "/dbs/db/colls/c/docs", `{"id":"1","pk":"a"}`, pk(`["a"]`), 409},
		{"PUT", "/dbs/db/colls/c/docs/1", `{"id":"1","pk":"a"}`, map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "If-Match": `"stale"`}, 412},
	} {
		r := c.must(tc.method, tc.path, tc.body, tc.headers, tc.status)
		for _, h := range []string{"x-ms-session-token", "x-ms-activity-id", "x-ms-request-charge"} {
			if r.header.Get(h) == "" {
				t.Fatalf("%s %s (%d) has no %s: %v", tc.method, tc.path, tc.status, h, r.header)
			}
		}
		if tok := r.header.Get("x-ms-session-token"); !strings.HasPrefix(tok, "0:-1#") {
			t.Fatalf("session token %q", tok)
		}
	}
	r := c.must("GET", "/dbs/nodb", "", nil, http.StatusNotFound)
	if r.header.Get("x-ms-activity-id") == "" || r.header.Get("x-ms-request-charge") == "" {
		t.Fatalf("headers %v", r.header)
	}
	// Successes of every kind carry both too.
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/dbs", ""}, {"GET", "/dbs/db", ""}, {"GET", "/dbs/db/colls/c", ""},
		{"GET", "/dbs/db/colls/c/pkranges", ""}, {"GET", "/dbs/db/colls/c/docs", ""}, {"GET", "/dbs/db/colls/c/sprocs", ""},
		{"GET", "/offers", ""}, {"GET", "/dbs/db/users", ""},
	} {
		r := c.must(tc.method, tc.path, tc.body, nil, 200)
		if r.header.Get("x-ms-activity-id") == "" || r.header.Get("x-ms-request-charge") == "" {
			t.Fatalf("%s %s: headers %v", tc.method, tc.path, r.header)
		}
	}
}

// A procedure or function with a syntax error is refused at create and
// replace with 400 naming the line, not stored to fail at its first run. A
// trigger is stored as sent, as the service stores it, and its syntax error
// is the 400 of the write that names it.
func TestScriptSyntaxErrorsAreRefusedAtCreateAndReplace(t *testing.T) {
	c := newTestServer(t)
	broken := "function f() {\n  var x = ;\n}"
	trigger, _ := json.Marshal(map[string]string{"id": "t", "body": broken, "triggerType": "Pre", "triggerOperation": "All"})
	c.must("POST", "/dbs/db/colls/c/triggers", string(trigger), nil, 201)
	r := c.must("POST", "/dbs/db/colls/c/docs", `{"id":"d","pk":"p"}`, map[string]string{
		"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-documentdb-pre-trigger-include": "t"}, 400)
	if _, msg := errorOf(t, r); !strings.Contains(msg, "at line 2, column 11") {
		t.Fatalf("a write naming a broken trigger: %s", r.body)
	}
	for _, kind := range []string{"sprocs", "udfs"} {
		body := func(id, src string) string {
			b, _ := json.Marshal(map[string]string{"id": id, "body": src, "triggerType": "Pre", "triggerOperation": "All"})
			return string(b)
		}
		base := "/dbs/db/colls/c/" + kind
		r := c.must("POST", base, body("s", broken), nil, 400)
		if code, msg := errorOf(t, r); code != "BadRequest" || !strings.Contains(msg, "SyntaxError: Unexpected token ; at line 2, column 11 of s") {
			t.Fatalf("create %s: %s", kind, r.body)
		}
		c.must("GET", base+"/s", "", nil, 404)
		c.must("POST", base, body("s", "function f() { return 1; }"), nil, 201)
		r = c.must("PUT", base+"/s", body("s", broken), nil, 400)
		if _, msg := errorOf(t, r); !strings.Contains(msg, "at line 2, column 11") {
			t.Fatalf("replace %s: %s", kind, r.body)
		}
		r = c.must("GET", base+"/s", "", nil, 200)
		if !strings.Contains(string(r.body), "return 1;") {
			t.Fatalf("%s after a refused replace: %s", kind, r.body)
		}
	}
}

// The service's HTTP front end refuses a URL whose path decodes to a control
// character before its gateway sees it: 400 with an HTML page and no Cosmos
// DB error body, for any method and resource, signed or not. The SDKs' suites
// record it (the Go SDK sees 400; the JavaScript SDK, parsing the body as
// JSON, fails without a status), and a client must not be able to read a
// JSON error from it that the service never sends.
func TestControlCharacterInPathIsRefusedWithTheFrontEndsPage(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"With\tTab","pk":"a"}`, pk(`["a"]`), 201)
	for _, path := range []string{
		"/dbs/db/colls/c/docs/With%09Tab",
		"/dbs/db/colls/c/docs/With%0ALineFeed",
		"/dbs/db/colls/c/docs/With%0DReturn",
		"/dbs/db/colls/c/docs/With%00Nul",
		"/dbs/db/colls/c/docs/With%7FDel",
		"/dbs/db/colls/c/docs/With%C2%85NextLine",
		"/dbs/db%09x",
	} {
		for _, m := range []string{"GET", "PUT", "PATCH", "DELETE"} {
			r := c.must(m, path, `{"id":"x","pk":"a"}`, pk(`["a"]`), 400)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("%s %s: Content-Type %q", m, path, ct)
			}
			if json.Valid(r.body) || !strings.Contains(string(r.body), "Bad Request - Invalid URL") {
				t.Fatalf("%s %s: %s", m, path, r.body)
			}
		}
	}
	// Characters past U+009F, and printable ones, are the gateway's to judge.
	for _, id := range []string{"WithUnicode\u00a0x", "WithUnicode\u9c40"} {
		body, _ := json.Marshal(map[string]string{"id": id, "pk": "a"})
		c.must("POST", "/dbs/db/colls/c/docs", string(body), pk(`["a"]`), 201)
	}
	c.must("GET", "/dbs/db/colls/c/docs/WithUnicode%C2%A0x", "", pk(`["a"]`), 200)
	c.must("GET", "/dbs/db/colls/c/docs/WithUnicode%E9%B1%80", "", pk(`["a"]`), 200)
}
