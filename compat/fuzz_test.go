package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// The fuzz targets below drive a whole server, in this process and over
// HTTPS, with hostile requests, and hold three invariants for every one:
// no answer is a 5xx (nor a dropped connection), every error is answered
// with a body in Cosmos's format ({"code": ..., "message": ...}), and the
// server still answers a read afterwards. `go test` runs their seed
// corpora (the bad-input table's requests and the minimal inputs that once
// broke an invariant); `go test -run=FuzzX -fuzz=FuzzX -parallel 1` looks
// for more.

// fuzzClient gives up on a request after a minute: a request the server
// never answers is a hang.
var fuzzClient = &http.Client{Timeout: time.Minute}

// fuzzResponse is a response's status, its body and its Content-Type.
type fuzzResponse struct {
	status int
	body   []byte
	ctype  string
}

// fuzzSend signs and sends one request; a header value the HTTP client
// cannot send is dropped (skip reports whether the request was sent).
func fuzzSend(s *orrerytest.Server, method, path, rtype, link string, body []byte, headers map[string]string) (resp fuzzResponse, skip bool, err error) {
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, method, rtype, link, date)
	if err != nil {
		return resp, false, err
	}
	req, err := http.NewRequest(method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return resp, true, nil
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, sendable(v))
	}
	r, err := fuzzClient.Do(req)
	if err != nil {
		return resp, false, err
	}
	defer r.Body.Close()
	out, err := io.ReadAll(r.Body)
	if err != nil {
		return resp, false, err
	}
	return fuzzResponse{r.StatusCode, out, r.Header.Get("Content-Type")}, false, nil
}

// sendable drops from v what Go's HTTP client cannot send in a header.
func sendable(v string) string {
	if sendableHeaderValue(v) {
		return v
	}
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// sendableHeaderValue reports whether Go's HTTP client sends v as a header
// value (no control characters but tab, no DEL).
func sendableHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// checkFuzzAnswer holds the invariants for one answered request.
func checkFuzzAnswer(t *testing.T, s *orrerytest.Server, what string, method string, resp fuzzResponse, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: no answer: %v", what, err)
	}
	if resp.status >= 500 {
		t.Fatalf("%s: answered %d %.400s", what, resp.status, resp.body)
	}
	if resp.status >= 400 && method != http.MethodHead {
		var e struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		}
		if jerr := json.Unmarshal(resp.body, &e); jerr != nil || e.Code == nil || e.Message == nil || *e.Code == "" {
			t.Fatalf("%s: error %d not in Cosmos's format (%s): %.400s", what, resp.status, resp.ctype, resp.body)
		}
	}
	if resp.status == http.StatusMultiStatus && bytes.Contains(resp.body, []byte(`"statusCode":5`)) {
		t.Fatalf("%s: an operation answered 5xx: %.400s", what, resp.body)
	}
	checkStillAnswers(t, s, what)
}

// checkStillAnswers holds that the server still answers a database read.
func checkStillAnswers(t *testing.T, s *orrerytest.Server, what string) {
	t.Helper()
	alive, _, aerr := fuzzSend(s, "GET", "dbs/db", "dbs", "dbs/db", nil, nil)
	if aerr != nil || alive.status != http.StatusOK {
		t.Fatalf("%s: afterwards the server does not answer a database read: %v %d %.200s", what, aerr, alive.status, alive.body)
	}
}

// fuzzServer starts the bad-input server (db/c with items n1, max and min
// in partition "a", stored procedures "create" and "infinity").
func fuzzServer(f *testing.F) *orrerytest.Server { return badInputServer(f) }

// fuzzHeaders are the request headers a fuzzed value may go in.
var fuzzHeaders = []string{
	"x-ms-documentdb-partitionkey", "x-ms-continuation", "x-ms-max-item-count", "x-ms-documentdb-partitionkeyrangeid",
	"x-ms-start-epk", "x-ms-end-epk", "If-Match", "If-None-Match", "If-Modified-Since", "x-ms-consistency-level",
	"x-ms-session-token", "x-ms-offer-throughput", "x-ms-cosmos-offer-autopilot-settings", "A-IM",
	"x-ms-documentdb-query-enablecrosspartition", "x-ms-documentdb-responsecontinuationtokenlimitinkb",
	"x-ms-indexing-directive", "x-ms-documentdb-populatequotainfo", "x-ms-cosmos-batch-atomic",
	"x-ms-cosmos-batch-continue-on-error", "x-ms-cosmos-is-batch-request", "x-ms-documentdb-is-upsert",
	"x-ms-date", "x-ms-version", "Content-Type", "x-ms-documentdb-isquery", "x-ms-cosmos-populateindexmetrics",
	"x-ms-documentdb-populatequerymetrics", "x-ms-documentdb-script-enable-logging", "x-ms-cosmos-priority-level",
	"x-ms-cosmos-changefeed-wire-format-version", "x-ms-cosmos-query-optimisticdirectexecute",
	"x-ms-documentdb-query-parallelizecrosspartitionquery", "x-ms-cosmos-supported-query-features",
	"x-ms-documentdb-pre-trigger-include", "x-ms-documentdb-post-trigger-include", "x-ms-cosmos-is-query-plan-request",
	"x-ms-documentdb-partitionkey-delete", "x-ms-cosmos-intended-collection-rid", "x-ms-documentdb-content-serialization-format",
	"Authorization", "x-ms-cosmos-max-integrated-cache-staleness", "x-ms-cosmos-correlated-activityid",
}

// fuzzHeader returns the headers of base plus header number n set to v.
func fuzzHeader(base map[string]string, n uint8, v string) map[string]string {
	h := map[string]string{}
	for k, x := range base {
		h[k] = x
	}
	if n != 0xFF {
		h[fuzzHeaders[int(n)%len(fuzzHeaders)]] = v
	}
	return h
}

// itemEndpoint is an endpoint of db/c that reads a body.
type itemEndpoint struct {
	name, method, path, rtype, link string
	headers                         map[string]string
}

var fuzzItemEndpoints = []itemEndpoint{
	{"create item", "POST", badColl + "/docs", "docs", badColl, pkA},
	{"create item without a partition key", "POST", badColl + "/docs", "docs", badColl, nil},
	{"upsert item", "POST", badColl + "/docs", "docs", badColl, upsertA},
	{"replace item", "PUT", badColl + "/docs/n1", "docs", badColl + "/docs/n1", pkA},
	{"patch item", "PATCH", badColl + "/docs/n1", "docs", badColl + "/docs/n1", pkA},
	{"batch", "POST", badColl + "/docs", "docs", badColl, batchA},
	{"bulk", "POST", badColl + "/docs", "docs", badColl, bulkHeader},
	{"query", "POST", badColl + "/docs", "docs", badColl, queryHeader},
	{"query plan", "POST", badColl + "/docs", "docs", badColl, map[string]string{"x-ms-documentdb-isquery": "true",
		"Content-Type": "application/query+json", "x-ms-cosmos-is-query-plan-request": "true", "x-ms-cosmos-supported-query-features": "Aggregate, CompositeAggregate, Distinct, MultipleOrderBy, OffsetAndLimit, OrderBy, Top, GroupBy, DCount, NonStreamingOrderBy, HybridSearch"}},
	{"execute a stored procedure", "POST", badColl + "/sprocs/create", "sprocs", badColl + "/sprocs/create", pkA},
	{"read feed", "GET", badColl + "/docs", "docs", badColl, nil},
	{"change feed", "GET", badColl + "/docs", "docs", badColl, map[string]string{"A-IM": "Incremental feed"}},
	{"read item", "GET", badColl + "/docs/n1", "docs", badColl + "/docs/n1", pkA},
	{"delete partition", "POST", badColl + "/operations/partitionkeydelete", "colls", badColl, nil},
}

// FuzzItemRequestsNeverGetA5xx sends a hostile body, partition key header
// and one more header of its choice to an endpoint of a container's items.
func FuzzItemRequestsNeverGetA5xx(f *testing.F) {
	for _, tc := range badInputCases {
		for i, ep := range fuzzItemEndpoints {
			if ep.method == tc.method && ep.path == tc.path && fmt.Sprint(ep.headers) == fmt.Sprint(tc.headers) {
				f.Add(uint8(i), []byte(tc.body), uint8(0xFF), "")
			}
		}
	}
	for i, v := range hostileValues {
		if len(v) < 2000 {
			f.Add(uint8(0), []byte(`{"id":"h","pk":"a","v":`+v+`}`), uint8(0), `[`+v+`]`)
			f.Add(uint8((i%len(fuzzValueTemplates)+1)<<4|i%len(fuzzItemEndpoints)), []byte(v), uint8(0xFF), "")
		}
	}
	for _, seed := range itemFuzzRegressions {
		f.Add(seed.endpoint, []byte(seed.body), seed.header, seed.value)
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte, header uint8, value string) {
		// The low four bits pick the endpoint; the high four a template
		// the body goes into as a value (0: the body as it is).
		ep := fuzzItemEndpoints[int(endpoint&0x0F)%len(fuzzItemEndpoints)]
		if tpl := int(endpoint >> 4); tpl > 0 {
			body = []byte(strings.ReplaceAll(fuzzValueTemplates[(tpl-1)%len(fuzzValueTemplates)], "%v", string(body)))
		}
		if ep.method == "GET" {
			body = nil
		}
		resp, skip, err := fuzzSend(s, ep.method, ep.path, ep.rtype, ep.link, body, fuzzHeader(ep.headers, header, value))
		if skip {
			return
		}
		checkFuzzAnswer(t, s, fmt.Sprintf("%s with %.200q and header %d = %.100q", ep.name, body, header, value), ep.method, resp, err)
	})
}

// fuzzValueTemplates are bodies with a hole (%v) for a fuzzed value.
var fuzzValueTemplates = []string{
	`{"id":"h","pk":"a","v":%v}`, `{"id":%v,"pk":"a"}`, `{"id":"h","pk":%v}`, `{"id":"h","pk":"a","ttl":%v}`,
	`{"operations":[{"op":"incr","path":"/v","value":%v}]}`, `{"operations":[{"op":"set","path":%v,"value":1}]}`,
	`{"operations":[{"op":"move","from":%v,"path":"/w"}]}`, `{"condition":%v,"operations":[{"op":"set","path":"/v","value":1}]}`,
	`[{"operationType":"Upsert","resourceBody":{"id":"h","pk":"a","v":%v}}]`,
	`[{"operationType":"Patch","id":"n1","partitionKey":"[\"a\"]","resourceBody":{"operations":[{"op":"add","path":"/a/-","value":%v}]}}]`,
	`[{"operationType":"Read","id":%v,"partitionKey":"[\"a\"]"},{"operationType":"Delete","id":"x","partitionKey":%v}]`,
	`{"query":"SELECT * FROM c WHERE c.v = @v","parameters":[{"name":"@v","value":%v}]}`,
	`{"query":"SELECT * FROM c","parameters":%v}`, `[%v]`, `{"id":"h","pk":"a","_ts":%v,"_etag":%v,"_rid":%v}`,
}

// itemFuzzRegressions are the minimal item requests that once broke an
// invariant (each named after what it broke).
var itemFuzzRegressions = []struct {
	name     string
	endpoint uint8
	body     string
	header   uint8
	value    string
}{}

// resourceEndpoint is an endpoint that creates or replaces a resource.
type resourceEndpoint = itemEndpoint

var fuzzResourceEndpoints = []resourceEndpoint{
	{"create container", "POST", "dbs/db/colls", "colls", "dbs/db", nil},
	{"replace container", "PUT", badColl, "colls", badColl, nil},
	{"create database", "POST", "dbs", "dbs", "", nil},
	{"create stored procedure", "POST", badColl + "/sprocs", "sprocs", badColl, nil},
	{"create trigger", "POST", badColl + "/triggers", "triggers", badColl, nil},
	{"create user defined function", "POST", badColl + "/udfs", "udfs", badColl, nil},
	{"create user", "POST", "dbs/db/users", "users", "dbs/db", nil},
	{"create client encryption key", "POST", "dbs/db/clientencryptionkeys", "clientencryptionkeys", "dbs/db", nil},
	{"create container with throughput", "POST", "dbs/db/colls", "colls", "dbs/db", map[string]string{"x-ms-offer-throughput": "12000"}},
	{"create container with autoscale", "POST", "dbs/db/colls", "colls", "dbs/db", map[string]string{"x-ms-cosmos-offer-autopilot-settings": `{"maxThroughput":4000}`}},
	{"query containers", "POST", "dbs/db/colls", "colls", "dbs/db", map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"}},
	{"query offers", "POST", "offers", "offers", "", map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"}},
}

// FuzzResourceBodiesNeverGetA5xx sends a hostile resource body: container
// definitions with their partition key, indexing, vector, full-text,
// unique key, computed property and encryption policies, databases,
// scripts, users, keys.
func FuzzResourceBodiesNeverGetA5xx(f *testing.F) {
	for _, tc := range badInputCases {
		for i, ep := range fuzzResourceEndpoints {
			if ep.method == tc.method && ep.path == tc.path && ep.headers == nil && tc.headers == nil {
				f.Add(uint8(i), []byte(tc.body))
			}
		}
	}
	policies := []string{
		`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"vectorIndexes":[{"path":"/v","type":"diskANN"}]},"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":3,"distanceFunction":"cosine"}]}}`,
		`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"fullTextIndexes":[{"path":"/t"}]},"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/t","language":"en-US"}]}}`,
		`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"compositeIndexes":[[{"path":"/a","order":"ascending"},{"path":"/b","order":"descending"}]],"spatialIndexes":[{"path":"/g/*","types":["Point"]}]}}`,
		`{"id":"r","partitionKey":{"paths":["/a","/b"],"kind":"MultiHash","version":2},"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/u"]}]},"computedProperties":[{"name":"cp","query":"SELECT VALUE LOWER(c.n) FROM c"}]}`,
		`{"id":"r","partitionKey":{"paths":["/pk"]},"clientEncryptionPolicy":{"includedPaths":[{"path":"/s","clientEncryptionKeyId":"k","encryptionType":"Deterministic","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256"}],"policyFormatVersion":2}}`,
		`{"id":"r","partitionKey":{"paths":["/pk"]},"defaultTtl":-1,"changeFeedPolicy":{"retentionDuration":10},"conflictResolutionPolicy":{"mode":"Custom","conflictResolutionProcedure":"dbs/db/colls/c/sprocs/x"}}`,
		`{"id":"sp","body":"function () { getContext().getResponse().setBody(1); }"}`,
		`{"id":"tr","body":"function () {}","triggerType":"Pre","triggerOperation":"All"}`,
		`{"id":"k","encryptionAlgorithm":"AEAD_AES_256_CBC_HMAC_SHA256","wrappedDataEncryptionKey":"AAEC","keyWrapMetadata":{"type":"custom","name":"n","value":"v","algorithm":"RSA-OAEP"}}`,
		`{"query":"SELECT * FROM root r WHERE r.id = @id","parameters":[{"name":"@id","value":"c"}]}`,
	}
	for i, p := range policies {
		f.Add(uint8(i%3), []byte(p))
	}
	for i, v := range hostileValues {
		if len(v) < 2000 {
			f.Add(uint8(0), []byte(`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":`+v+`}],"indexingMode":`+v+`}}`))
			f.Add(uint8((i%len(fuzzPolicyTemplates)+1)<<4), []byte(v))
		}
	}
	for i, p := range []string{`{"paths":["/pk"],"kind":"Hash","version":1}`, `{"indexingMode":"consistent","includedPaths":[{"path":"/*"}]}`,
		`{"path":"/v","type":"quantizedFlat","quantizationByteSize":2}`, `{"path":"/v","dataType":"int8","dimensions":5000,"distanceFunction":"dotproduct"}`,
		`{"defaultLanguage":"1033","fullTextPaths":[{"path":"/t","language":"en-US"}]}`, `[[{"path":"/a"},{"path":"/b","order":"descending"}]]`,
		`[{"path":"/g/?","types":["Polygon","MultiPolygon"]}]`, `[{"name":"cp","query":"SELECT VALUE c.a FROM c"}]`,
		`{"uniqueKeys":[{"paths":["/u","/v"]}]}`, `{"includedPaths":[],"policyFormatVersion":3}`, `60`, `{"mode":"Custom"}`,
		`"SELECT VALUE LOWER(c.n) FROM c JOIN t IN c.tags"`, `"/a/?"`} {
		f.Add(uint8((i+1)<<4), []byte(p))
	}
	for _, seed := range resourceFuzzRegressions {
		f.Add(seed.endpoint, []byte(seed.body))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		// The low four bits pick the endpoint; the high four a container
		// definition the body goes into as a policy (0: the body as it is).
		ep := fuzzResourceEndpoints[int(endpoint&0x0F)%len(fuzzResourceEndpoints)]
		if tpl := int(endpoint >> 4); tpl > 0 {
			ep = fuzzResourceEndpoints[0]
			body = []byte(strings.ReplaceAll(fuzzPolicyTemplates[(tpl-1)%len(fuzzPolicyTemplates)], "%v", string(body)))
		}
		resp, skip, err := fuzzSend(s, ep.method, ep.path, ep.rtype, ep.link, body, ep.headers)
		if skip {
			return
		}
		checkFuzzAnswer(t, s, fmt.Sprintf("%s with %.300q", ep.name, body), ep.method, resp, err)
		if resp.status == http.StatusCreated && ep.method == "POST" {
			// Remove what was created, so that the next input finds the
			// same server.
			var created struct{ ID string }
			if json.Unmarshal(resp.body, &created) == nil && created.ID != "" {
				link := ep.link
				if link != "" {
					link += "/"
				}
				link += ep.rtype + "/" + created.ID
				fuzzSend(s, "DELETE", ep.path+"/"+url.PathEscape(created.ID), ep.rtype, link, nil, nil)
			}
		}
	})
}

// fuzzPolicyTemplates are container definitions with a hole (%v) for a
// fuzzed policy or part of one.
var fuzzPolicyTemplates = []string{
	`{"id":"r","partitionKey":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"vectorIndexes":[%v]},"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":3,"distanceFunction":"cosine"}]}}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"vectorEmbeddingPolicy":{"vectorEmbeddings":[%v]}}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"fullTextIndexes":[{"path":"/t"}]},"fullTextPolicy":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"compositeIndexes":%v}}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"spatialIndexes":%v}}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"computedProperties":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"uniqueKeyPolicy":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"clientEncryptionPolicy":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"defaultTtl":%v,"changeFeedPolicy":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"conflictResolutionPolicy":%v,"geospatialConfig":%v}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"computedProperties":[{"name":"cp","query":%v}]}`,
	`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":%v,"indexes":[{"kind":"Range","dataType":"Number","precision":-1}]}]}}`,
}

// resourceFuzzRegressions are the minimal resource bodies that once broke
// an invariant.
var resourceFuzzRegressions = []struct {
	name     string
	endpoint uint8
	body     string
}{}

// FuzzRequestLinesNeverGetA5xx sends any method, path, query string, one
// header of its choice and a body, signed as the SDKs sign the path.
func FuzzRequestLinesNeverGetA5xx(f *testing.F) {
	paths := []string{"dbs", "dbs/db", "dbs/db/colls", badColl, badColl + "/docs", badColl + "/docs/n1", badColl + "/pkranges",
		badColl + "/sprocs", badColl + "/sprocs/create", badColl + "/triggers", badColl + "/udfs", badColl + "/conflicts",
		"dbs/db/users", "offers", "", "_explorer/index.html", "dbs/db/clientencryptionkeys", badColl + "/docs/n1/attachments",
		"dbs/db/colls/c/docs/%20", "dbs/db/colls/c/docs/a%2Fb", "dbs//colls", "dbs/db/colls/c/docs/n1/x/y/z"}
	for i, p := range paths {
		f.Add(uint8(i), p, "", uint8(0xFF), "", []byte(nil))
	}
	for _, tc := range badInputCases {
		for n, h := range fuzzHeaders {
			if v, ok := tc.headers[h]; ok {
				f.Add(uint8(2), tc.path, "", uint8(n), v, []byte(tc.body))
			}
		}
	}
	f.Add(uint8(0), badColl+"/docs", "", uint8(1), "not a continuation", []byte(nil))
	f.Add(uint8(0), badColl+"/docs", "", uint8(1), `{"token":"-RID:~abc#RT:1#TRC:1","range":{"min":"","max":"FF"}}`, []byte(nil))
	f.Add(uint8(0), badColl+"/docs", "", uint8(13), "Incremental feed", []byte(nil))
	f.Add(uint8(0), badColl+"/pkranges", "", uint8(8), "Tue, 01 Jan 1980 00:00:00 GMT", []byte(nil))
	f.Add(uint8(2), badColl+"/docs", "a=%zz&b", uint8(2), "-5", []byte(`{"query":"SELECT * FROM c"}`))
	for _, seed := range requestLineFuzzRegressions {
		f.Add(seed.method, seed.path, seed.query, seed.header, seed.value, []byte(seed.body))
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, method uint8, path, query string, header uint8, value string, body []byte) {
		m := methods[int(method)%len(methods)]
		if m == "DELETE" && (path == "dbs/db" || path == badColl || strings.Count(strings.Trim(path, "/"), "/") < 4) {
			m = "GET" // keep the fixture: delete items, not the database or container
		}
		if strings.ContainsAny(path, "?#") || !sendableHeaderValue(path) || strings.ContainsAny(path, " ") {
			path = url.PathEscape(path)
		}
		rtype, link := signingParts(path)
		full := path
		if query != "" {
			if !sendableHeaderValue(query) || strings.ContainsAny(query, " #") {
				query = url.QueryEscape(query)
			}
			full += "?" + query
		}
		resp, skip, err := fuzzSend(s, m, full, rtype, link, body, fuzzHeader(nil, header, value))
		if skip {
			return
		}
		what := fmt.Sprintf("%s /%.200s with header %d = %.100q and body %.100q", m, full, header, value, body)
		if err == nil && resp.status == http.StatusBadRequest && strings.HasPrefix(resp.ctype, "text/html") {
			// The service's HTTP front end refuses a path holding a control
			// character with its own HTML page before any gateway sees it
			// (server/invalidurl.go); no other request gets it.
			if !frontEndRefusesURL(full) {
				t.Fatalf("%s: answered the front end's 400 page without a control character in the URL", what)
			}
			checkStillAnswers(t, s, what)
			return
		}
		checkFuzzAnswer(t, s, what, m, resp, err)
	})
}

// frontEndRefusesURL reports whether the path and query of a request,
// percent-decoded, hold a control character (U+0000–U+001F, U+007F–U+009F):
// the gateway reads a query string after an item path as part of the id.
func frontEndRefusesURL(full string) bool {
	// Decoded escape by escape: a stray '%' elsewhere does not hide one.
	var d []byte
	for i := 0; i < len(full); i++ {
		if full[i] == '%' && i+2 < len(full) {
			if b, err := strconv.ParseUint(full[i+1:i+3], 16, 8); err == nil {
				d = append(d, byte(b))
				i += 2
				continue
			}
		}
		d = append(d, full[i])
	}
	for _, r := range string(d) {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// requestLineFuzzRegressions are the minimal requests that once broke an
// invariant.
var requestLineFuzzRegressions = []struct {
	name        string
	method      uint8
	path, query string
	header      uint8
	value, body string
}{
	// The explorer's errors were plain text.
	{"the explorer's 405 is a Cosmos error body", 4, "_explorer", "0", 0xFF, "", ""},
	{"the explorer's 404 is a Cosmos error body", 0, "_explorer/nothing-here", "", 0xFF, "", ""},
	// A failed If-Match on the explorer's files was a 412 without a body.
	{"the explorer's 412 is a Cosmos error body", 0, "_explorer", "0", 178, "0", "0"},
}

// signingParts returns the resource type and link an SDK signs a request
// for path with: the last type segment, and the path up to the resource.
func signingParts(path string) (rtype, link string) {
	p, err := url.PathUnescape(strings.Trim(path, "/"))
	if err != nil {
		p = strings.Trim(path, "/")
	}
	if p == "" {
		return "", ""
	}
	segs := strings.Split(p, "/")
	if len(segs)%2 == 1 {
		return segs[len(segs)-1], strings.Join(segs[:len(segs)-1], "/")
	}
	return segs[len(segs)-2], p
}

// FuzzQueriesNeverGetA5xx runs any query text, with parameters and a
// continuation of its choice, across the container's partitions and in one.
func FuzzQueriesNeverGetA5xx(f *testing.F) {
	queries := []string{
		"SELECT * FROM c", "SELECT VALUE COUNT(1) FROM c", "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk",
		"SELECT DISTINCT VALUE c.v FROM c ORDER BY c.v", "SELECT TOP 1 * FROM c ORDER BY c._ts DESC",
		"SELECT * FROM c OFFSET 1 LIMIT 1", "SELECT * FROM c WHERE c.v = @v", "SELECT * FROM c WHERE c.v = 1e400",
		"SELECT VALUE ST_DISTANCE({'type':'Point','coordinates':[0,0]}, c.g) FROM c",
		"SELECT TOP 2 c.id FROM c ORDER BY VectorDistance(c.e, [1,2,3])", "SELECT * FROM c ORDER BY RANK FullTextScore(c.t, 'a')",
		"SELECT VALUE udf.f(c) FROM c", "SELECT * FROM c JOIN t IN c.tags WHERE ARRAY_CONTAINS(c.a, 1)",
		"SELECT VALUE SUM(c.v) FROM c", "SELECT VALUE AVG(c.v) FROM c WHERE IS_NUMBER(c.v)",
	}
	for _, q := range queries {
		f.Add(q, `[{"name":"@v","value":1}]`, "", true)
	}
	f.Add("SELECT * FROM c", `[]`, "garbage", true)
	f.Add("SELECT * FROM c ORDER BY c.v", `[]`, `[{"compositeToken":{"token":null,"range":{"min":"","max":"FF"}},"orderByItems":[{"item":1}],"rid":"x","skipCount":0,"filter":null}]`, true)
	f.Add("SELECT * FROM c", `[{"name":"@v","value":{"a":1,"a":2}}]`, "", false)
	for _, seed := range queryFuzzRegressions {
		f.Add(seed.query, seed.params, seed.continuation, seed.cross)
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, query, params, continuation string, cross bool) {
		q, err := json.Marshal(query)
		if err != nil {
			return
		}
		body := []byte(`{"query":` + string(q) + `,"parameters":` + params + `}`)
		h := map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json", "x-ms-max-item-count": "2"}
		if cross {
			h["x-ms-documentdb-query-enablecrosspartition"] = "true"
		} else {
			h["x-ms-documentdb-partitionkey"] = `["a"]`
		}
		if continuation != "" {
			h["x-ms-continuation"] = continuation
		}
		resp, skip, err := fuzzSend(s, "POST", badColl+"/docs", "docs", badColl, body, h)
		if skip {
			return
		}
		checkFuzzAnswer(t, s, fmt.Sprintf("query %.300q with parameters %.200q and continuation %.200q", query, params, continuation), "POST", resp, err)
	})
}

// queryFuzzRegressions are the minimal queries that once broke an
// invariant.
var queryFuzzRegressions = []struct {
	name, query, params, continuation string
	cross                             bool
}{}

// FuzzStoredProceduresNeverGetA5xx registers a stored procedure of any
// text and runs it with any arguments in partition "a".
func FuzzStoredProceduresNeverGetA5xx(f *testing.F) {
	scripts := []string{
		`function(){ getContext().getResponse().setBody(1); }`,
		`function(d){ __.createDocument(__.getSelfLink(), d, function(e, r){ if (e) throw e; getContext().getResponse().setBody(r); }); }`,
		`function(){ var s = "x"; for (var i = 0; i < 40; i++) s = s + s; }`,
		`function(){ while (true) {} }`,
		`function(){ throw new Error("no"); }`,
		`function(){ __.queryDocuments(__.getSelfLink(), "SELECT * FROM c", function(e, docs){ getContext().getResponse().setBody(docs); }); }`,
		`function(){ __.replaceDocument("x", {}, function(){}); }`,
		`function(){ getContext().getResponse().setBody({v: Infinity, w: NaN, u: undefined}); }`,
		`function(id){ __.readDocument(__.getAltLink() + "/docs/" + id, function(e, d){ if (e) throw e; __.upsertDocument(__.getSelfLink(), d); }); }`,
		`function(){ __.chain().filter(function(d){ return d.v > 0; }).map(function(d){ return d.v; }).value(); }`,
		`syntax error (`,
	}
	args := []string{`[]`, `[{"id":"s1","pk":"a"}]`, `["n1"]`, `[1e400]`, `{"not":"a list"}`, `[{"id":"s2","id":"s3","pk":"a"}]`, ``}
	for i, sc := range scripts {
		f.Add(sc, args[i%len(args)])
	}
	for _, seed := range scriptFuzzRegressions {
		f.Add(seed.script, seed.args)
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, script, args string) {
		def, err := json.Marshal(map[string]string{"id": "fz", "body": script})
		if err != nil {
			return
		}
		resp, skip, err := fuzzSend(s, "POST", badColl+"/sprocs", "sprocs", badColl, def, nil)
		if skip {
			return
		}
		checkFuzzAnswer(t, s, fmt.Sprintf("creating a stored procedure of %.300q", script), "POST", resp, err)
		if resp.status != http.StatusCreated {
			return
		}
		defer fuzzSend(s, "DELETE", badColl+"/sprocs/fz", "sprocs", badColl+"/sprocs/fz", nil, nil)
		resp, skip, err = fuzzSend(s, "POST", badColl+"/sprocs/fz", "sprocs", badColl+"/sprocs/fz", []byte(args), pkA)
		if skip {
			return
		}
		checkFuzzAnswer(t, s, fmt.Sprintf("running a stored procedure of %.300q with %.200q", script, args), "POST", resp, err)
	})
}

// scriptFuzzRegressions are the minimal scripts that once broke an
// invariant.
var scriptFuzzRegressions = []struct{ name, script, args string }{}
