package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// writerSproc creates the item {"id": args[0], "pk": "a"} in the partition it runs in.
const writerSproc = `{"id":"writer","body":"function (id) { var c = getContext().getCollection(); ` +
	`if (!c.createDocument(c.getSelfLink(), {id: id, pk: 'a'}, function (err) { if (err) throw err; getContext().getResponse().setBody('wrote'); })) throw new Error('not accepted'); }"}`

// TestHoleReadCredentialsCannotExecuteStoredProcedures: executing a stored
// procedure is a write whatever headers come with the POST; the read-only
// key and Read tokens get 403 and the procedure does not run.
func TestHoleReadCredentialsCannotExecuteStoredProcedures(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/sprocs", writerSproc, nil, 201)
	c.must("POST", "/dbs/db/users", `{"id":"u"}`, nil, 201)
	read, _ := c.permissionToken("u", `{"id":"read","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil)
	ro := &rawClient{t: t, url: c.url, key: readOnlyKey}
	disguises := []map[string]string{
		{},
		{"x-ms-documentdb-isquery": "true"},
		{"Content-Type": "application/query+json"},
		{"x-ms-documentdb-query": "true"},
		{"x-ms-cosmos-is-query-plan-request": "True"},
		{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"},
	}
	for i, h := range disguises {
		h["x-ms-documentdb-partitionkey"] = `["a"]`
		id := `["w` + string(rune('0'+i)) + `"]`
		r := ro.do("POST", "/dbs/db/colls/c/sprocs/writer", id, h)
		if r.status != 403 {
			t.Errorf("read-only key, headers %v: status %d, want 403: %s", h, r.status, r.body)
		}
		r = c.do("POST", "/dbs/db/colls/c/sprocs/writer", id, withToken(read, h))
		if r.status != 403 {
			t.Errorf("Read token, headers %v: status %d, want 403: %s", h, r.status, r.body)
		}
	}
	feed := c.must("GET", "/dbs/db/colls/c/docs", "", nil, 200)
	if !strings.Contains(string(feed.body), `"_count":0`) {
		t.Fatalf("a refused procedure wrote: %s", feed.body)
	}
	// The master key still runs it.
	c.must("POST", "/dbs/db/colls/c/sprocs/writer", `["ok"]`, pk(`["a"]`), 200)
}

// TestHolePartitionTokenConfinedInBulk: a token for partition ["A"] may not
// read, write or delete items of ["B"] through operations of a bulk or
// batch request, whatever the request's header says.
func TestHolePartitionTokenConfinedInBulk(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"a1","pk":"A"}`, pk(`["A"]`), 201)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"b1","pk":"B","secret":"bee"}`, pk(`["B"]`), 201)
	c.must("POST", "/dbs/db/users", `{"id":"u"}`, nil, 201)
	onlyA, _ := c.permissionToken("u", `{"id":"pka","permissionMode":"All","resource":"dbs/db/colls/c","resourcePartitionKey":["A"]}`, nil)
	before := c.must("GET", "/dbs/db/colls/c/docs", "", nil, 200).body

	ops := `[{"operationType":"Read","id":"b1","partitionKey":"[\"B\"]"},` +
		`{"operationType":"Upsert","partitionKey":"[\"B\"]","resourceBody":{"id":"b2","pk":"B"}},` +
		`{"operationType":"Create","resourceBody":{"id":"b3","pk":"B"}},` +
		`{"operationType":"Replace","id":"b1","partitionKey":"[\"B\"]","resourceBody":{"id":"b1","pk":"B"}},` +
		`{"operationType":"Patch","id":"b1","partitionKey":"[\"B\"]","resourceBody":{"operations":[{"op":"set","path":"/x","value":1}]}},` +
		`{"operationType":"Delete","id":"b1","partitionKey":"[\"B\"]"}]`
	for _, h := range []map[string]string{
		{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false", "x-ms-documentdb-partitionkey": `["A"]`},
		{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false", "x-ms-documentdb-partitionkeyrangeid": "0"},
		{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false"},
		{"x-ms-cosmos-is-batch-request": "true", "x-ms-documentdb-partitionkey": `["A"]`},
	} {
		r := c.do("POST", "/dbs/db/colls/c/docs", ops, withToken(onlyA, h))
		if strings.Contains(string(r.body), "bee") {
			t.Errorf("headers %v: B's item came back: %d %s", h, r.status, r.body)
		}
		if r.status == 200 || r.status == 207 {
			var results []struct {
				StatusCode int `json:"statusCode"`
			}
			if err := json.Unmarshal(r.body, &results); err != nil {
				t.Fatalf("headers %v: %v: %s", h, err, r.body)
			}
			for i, res := range results {
				if res.StatusCode < 400 {
					t.Errorf("headers %v: operation %d on partition B: status %d", h, i, res.StatusCode)
				}
			}
		}
	}
	if after := c.must("GET", "/dbs/db/colls/c/docs", "", nil, 200).body; string(after) != string(before) {
		t.Fatalf("partition B changed through a token for A:\nbefore %s\nafter  %s", before, after)
	}
	// Its own partition still works through bulk.
	r := c.must("POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"a1","partitionKey":"[\"A\"]"},{"operationType":"Create","resourceBody":{"id":"a2","pk":"A"}}]`,
		withToken(onlyA, map[string]string{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false"}), 200)
	if !strings.Contains(string(r.body), `"a1"`) {
		t.Fatalf("own partition bulk: %s", r.body)
	}
}

// TestHoleNarrowTokensCannotActOnContainer: partition- and item-scoped
// permissions, and container-level Read, grant nothing over the container
// itself or its scripts.
func TestHoleNarrowTokensCannotActOnContainer(t *testing.T) {
	c := newTestServer(t)
	c.must("POST", "/dbs/db/colls/c/docs", `{"id":"b1","pk":"B"}`, pk(`["B"]`), 201)
	c.must("POST", "/dbs/db/colls/c/sprocs", writerSproc, nil, 201)
	for _, u := range []string{"u1", "u2"} {
		c.must("POST", "/dbs/db/users", `{"id":"`+u+`"}`, nil, 201)
	}
	onlyA, _ := c.permissionToken("u1", `{"id":"pka","permissionMode":"All","resource":"dbs/db/colls/c","resourcePartitionKey":["A"]}`, nil)
	item, _ := c.permissionToken("u1", `{"id":"item","permissionMode":"All","resource":"dbs/db/colls/c/docs/b1"}`, nil)
	read, _ := c.permissionToken("u2", `{"id":"read","permissionMode":"Read","resource":"dbs/db/colls/c"}`, nil)
	container := `{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`
	trigger := `{"id":"t","body":"function () {}","triggerType":"Pre","triggerOperation":"All"}`
	for name, tok := range map[string]string{"partition": onlyA, "item": item, "container Read": read} {
		for _, h := range []map[string]string{nil, pk(`["A"]`)} {
			for _, tc := range []struct{ method, path, body string }{
				{"DELETE", "/dbs/db/colls/c", ""},
				{"PUT", "/dbs/db/colls/c", container},
				{"PUT", "/dbs/db/colls/c/sprocs/writer", `{"id":"writer","body":"function () {}"}`},
				{"DELETE", "/dbs/db/colls/c/sprocs/writer", ""},
				{"POST", "/dbs/db/colls/c/sprocs", `{"id":"s2","body":"function () {}"}`},
				{"POST", "/dbs/db/colls/c/triggers", trigger},
				{"POST", "/dbs/db/colls/c/udfs", `{"id":"f","body":"function () { return 1; }"}`},
				{"POST", "/dbs/db/colls", `{"id":"c2","partitionKey":{"paths":["/pk"]}}`},
				{"DELETE", "/dbs/db", ""},
			} {
				if r := c.do(tc.method, tc.path, tc.body, withToken(tok, h)); r.status != 403 {
					t.Errorf("%s token %v: %s %s: status %d, want 403: %s", name, h, tc.method, tc.path, r.status, r.body)
				}
			}
		}
	}
	c.must("GET", "/dbs/db/colls/c/docs/b1", "", pk(`["B"]`), 200)
	c.must("GET", "/dbs/db/colls/c/sprocs/writer", "", nil, 200)
	c.must("GET", "/dbs/db/colls/c/triggers/t", "", nil, 404)
	coll := c.must("GET", "/dbs/db/colls/c", "", nil, 200)
	if strings.Contains(string(coll.body), `"none"`) {
		t.Fatalf("the container was replaced: %s", coll.body)
	}
}

// TestPartitionTokenScriptsStayInPartition: code a partition-scoped token
// sets running (a stored procedure, a pre-trigger that rewrites the
// partition key) cannot write outside the token's partition.
func TestPartitionTokenScriptsStayInPartition(t *testing.T) {
	f := newAuthzFixture(t)
	if rec := f.do(credMaster, "POST", "/dbs/db/colls/c/triggers", `{"id":"move","triggerType":"Pre","triggerOperation":"All","body":"function () { var r = getContext().getRequest(); var d = r.getBody(); d.pk = 'B'; r.setBody(d); }"}`, nil); rec.Code != 201 {
		t.Fatalf("trigger: %d %s", rec.Code, rec.Body)
	}
	before := f.snapshot()
	for _, tc := range []struct {
		method, path, body string
		headers            map[string]string
	}{
		{"POST", "/dbs/db/colls/c/docs", `{"id":"moved","pk":"A"}`, hdr(hPK, pkA, "x-ms-documentdb-pre-trigger-include", "move")},
		{"PUT", "/dbs/db/colls/c/docs/a1", `{"id":"a1","pk":"A"}`, hdr(hPK, pkA, "x-ms-documentdb-pre-trigger-include", "move")},
		{"POST", "/dbs/db/colls/c/sprocs/writer", `["z","B"]`, hdr(hPK, pkA)},
	} {
		rec := f.do(credPartition, tc.method, tc.path, tc.body, tc.headers)
		if rec.Code < 400 {
			t.Errorf("%s %s: status %d: %s", tc.method, tc.path, rec.Code, rec.Body)
		}
	}
	if bad := changedOutside(credPartition, before, f.snapshot()); len(bad) > 0 {
		t.Fatalf("changed outside partition A: %v", bad)
	}
}
