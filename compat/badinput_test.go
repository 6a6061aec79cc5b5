package compat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// badRequestCase is one hostile request: what is sent, and the status and a
// piece of the body it must be answered with.
type badRequestCase struct {
	name                string
	method, path, rtype string
	link                string
	body                string
	headers             map[string]string
	status              int
	says                string
}

const (
	badColl    = "dbs/db/colls/c"
	payloadBad = "Ensure to provide a valid request payload"
	outOfRange = "is outside the range of a double-precision number"
)

var (
	pkA        = map[string]string{"x-ms-documentdb-partitionkey": `["a"]`}
	upsertA    = map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-documentdb-is-upsert": "true"}
	batchA     = map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "true"}
	bulkHeader = map[string]string{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false",
		"x-ms-cosmos-batch-continue-on-error": "true", "x-ms-documentdb-partitionkeyrangeid": "0"}
	queryHeader = map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json",
		"x-ms-documentdb-query-enablecrosspartition": "true"}
	digits400 = strings.Repeat("9", 400)
)

func createItemCase(name, body string, status int, says string) badRequestCase {
	return badRequestCase{name, "POST", badColl + "/docs", "docs", badColl, body, pkA, status, says}
}

func patchCase(name, id, ops string, status int, says string) badRequestCase {
	link := badColl + "/docs/" + id
	return badRequestCase{name, "PATCH", link, "docs", link, `{"operations":[` + ops + `]}`, pkA, status, says}
}

// badInputCases are the hostile requests of the bad-input table, in the
// order the table lists them. Items n1 (v: 1) and max (v: the largest
// 64-bit integer) exist in partition "a" of db/c, and sproc "create"
// creates its argument.
var badInputCases = []badRequestCase{
	createItemCase("create: 1e400", `{"id":"x1","pk":"a","v":1e400}`, 400, outOfRange),
	createItemCase("create: -1e400", `{"id":"x2","pk":"a","v":-1e400}`, 400, "the number -1e400 "+outOfRange),
	createItemCase("create: a 400-digit integer", `{"id":"x3","pk":"a","v":`+digits400+`}`, 400, "(400 characters) "+outOfRange),
	createItemCase("create: 1E+309 deep in arrays", `{"id":"x4","pk":"a","v":{"w":[1,[2,1E+309]]}}`, 400, payloadBad),
	createItemCase("create: 1e-400 (reads as 0 everywhere)", `{"id":"x5","pk":"a","v":1e-400}`, 201, `"v":1e-400`),
	createItemCase("create: 1.7976931348623157e308 (the largest double)", `{"id":"x6","pk":"a","v":1.7976931348623157e308}`, 201, `"id":"x6"`),
	{"upsert: 1e400", "POST", badColl + "/docs", "docs", badColl, `{"id":"x1","pk":"a","v":1e400}`, upsertA, 400, outOfRange},
	{"replace: 1e400", "PUT", badColl + "/docs/n1", "docs", badColl + "/docs/n1", `{"id":"n1","pk":"a","v":1e400}`, pkA, 400, outOfRange},
	patchCase("patch set: 1e400", "n1", `{"op":"set","path":"/v","value":1e400}`, 400, outOfRange),
	patchCase("patch add: a 400-digit integer", "n1", `{"op":"add","path":"/w","value":[`+digits400+`]}`, 400, outOfRange),
	patchCase("patch incr: 1e400", "n1", `{"op":"incr","path":"/v","value":1e400}`, 400, outOfRange),
	patchCase("patch incr: past the 64-bit integer range", "max", `{"op":"incr","path":"/v","value":1}`, 400, "outside the range of a 64-bit integer"),
	patchCase("patch incr: below the 64-bit integer range", "min", `{"op":"incr","path":"/v","value":-1}`, 400, "outside the range of a 64-bit integer"),
	patchCase("patch incr: past the double range", "n1", `{"op":"incr","path":"/f","value":1.7e308},{"op":"incr","path":"/f","value":1.7e308}`, 400, "overflows"),
	{"batch: create 1e400", "POST", badColl + "/docs", "docs", badColl,
		`[{"operationType":"Create","resourceBody":{"id":"b1","pk":"a","v":1e400}}]`, batchA, 207, `"statusCode":400`},
	{"bulk: create 1e400", "POST", badColl + "/docs", "docs", badColl,
		`[{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"b2","pk":"a","v":1e400}}]`, bulkHeader, 207, outOfRange},
	{"query: 1e400 as a literal", "POST", badColl + "/docs", "docs", badColl, `{"query":"SELECT * FROM c WHERE c.v = 1e400"}`, queryHeader, 400, "1e400"},
	{"query: 1e400 as a parameter", "POST", badColl + "/docs", "docs", badColl,
		`{"query":"SELECT * FROM c WHERE c.v = @v","parameters":[{"name":"@v","value":1e400}]}`, queryHeader, 400, outOfRange},
	{"partition key header: [1e400]", "POST", badColl + "/docs", "docs", badColl, `{"id":"p1","pk":1}`,
		map[string]string{"x-ms-documentdb-partitionkey": `[1e400]`}, 400, "1e400"},
	{"sproc: argument 1e400", "POST", badColl + "/sprocs/create", "sprocs", badColl + "/sprocs/create", `[{"id":"s1","pk":"a","v":1e400}]`, pkA, 400, "not valid JSON"},
	{"sproc: creates Infinity (stored as null, as JSON.stringify writes it)", "POST", badColl + "/sprocs/infinity", "sprocs", badColl + "/sprocs/infinity", `[]`, pkA, 200, `"v":null`},
	{"database: 1e400 in its body", "POST", "dbs", "dbs", "", `{"id":"dbx","v":1e400}`, nil, 400, outOfRange},
	{"stored procedure: 1e400 in its body", "POST", badColl + "/sprocs", "sprocs", badColl, `{"id":"sp2","body":"function(){}","x":1e400}`, nil, 400, outOfRange},
	{"user: 1e400 in its body", "POST", "dbs/db/users", "users", "dbs/db", `{"id":"u1","x":1e400}`, nil, 400, outOfRange},

	createItemCase("create: id named twice", `{"id":"d1","id":"d2","pk":"a"}`, 400, `the property name "id" appears more than once`),
	createItemCase("create: id named twice, once escaped", `{"id":"d1","i\u0064":"d2","pk":"a"}`, 400, `"id" appears more than once`),
	createItemCase("create: ttl named twice", `{"id":"d3","pk":"a","ttl":5,"ttl":-1}`, 400, `"ttl" appears more than once`),
	createItemCase("create: partition key named twice", `{"id":"d4","pk":"a","pk":"b"}`, 400, `"pk" appears more than once`),
	createItemCase("create: a nested property named twice", `{"id":"d5","pk":"a","o":{"x":1,"x":2}}`, 400, `"x" appears more than once`),
	createItemCase("create: the same name in sibling objects", `{"id":"d6","pk":"a","o":[{"x":1},{"x":2}]}`, 201, `"id":"d6"`),
	{"upsert: id named twice", "POST", badColl + "/docs", "docs", badColl, `{"id":"d1","id":"d2","pk":"a"}`, upsertA, 400, `"id" appears more than once`},
	patchCase("patch set: an object naming a property twice", "n1", `{"op":"set","path":"/o","value":{"x":1,"x":2}}`, 400, `"x" appears more than once`),
	{"batch: id named twice", "POST", badColl + "/docs", "docs", badColl,
		`[{"operationType":"Upsert","resourceBody":{"id":"d1","id":"d2","pk":"a"}}]`, batchA, 207, `"statusCode":400`},
	{"query: the body not JSON", "POST", badColl + "/docs", "docs", badColl, `{"query":"SELECT * FROM c",}`, queryHeader, 400, "not valid JSON"},
	{"query: no query text", "POST", badColl + "/docs", "docs", badColl, `{"query":"","parameters":[{"name":"@v","value":1}]}`, queryHeader, 400, "no query text"},
	{"query: the query text not a string", "POST", badColl + "/docs", "docs", badColl, `{"query":1}`, queryHeader, 400, "not valid JSON"},
	{"query: a parameter naming a property twice", "POST", badColl + "/docs", "docs", badColl,
		`{"query":"SELECT * FROM c WHERE c.o = @o","parameters":[{"name":"@o","value":{"x":1,"x":2}}]}`, queryHeader, 400, `"x" appears more than once`},
	{"database: id named twice", "POST", "dbs", "dbs", "", `{"id":"db1","id":"db2"}`, nil, 400, `"id" appears more than once`},
	{"sproc: argument naming id twice (JavaScript keeps the last)", "POST", badColl + "/sprocs/create", "sprocs", badColl + "/sprocs/create", `[{"id":"s2","id":"s3","pk":"a"}]`, pkA, 200, `"id":"s3"`},

	createItemCase("create: id of 256 characters (the service allows 1,023 bytes)", `{"id":"`+strings.Repeat("i", 256)+`","pk":"a"}`, 201, `"pk":"a"`),
	createItemCase("create: id of 1,023 bytes", `{"id":"`+strings.Repeat("i", 1023)+`","pk":"a"}`, 201, `"pk":"a"`),
	createItemCase("create: id of 1,024 bytes", `{"id":"`+strings.Repeat("i", 1024)+`","pk":"a"}`, 400, "less than '1024' characters"),
	{"database: id of 256 characters", "POST", "dbs", "dbs", "", `{"id":"` + strings.Repeat("i", 256) + `"}`, nil, 400, "maximum length of 255"},
	{"container: id of 256 characters", "POST", "dbs/db/colls", "colls", "dbs/db",
		`{"id":"` + strings.Repeat("i", 256) + `","partitionKey":{"paths":["/pk"],"kind":"Hash"}}`, nil, 400, "maximum length of 255"},
	{"container: partition key path with a space", "POST", "dbs/db/colls", "colls", "dbs/db",
		`{"id":"pkspace","partitionKey":{"paths":["/id ds"],"kind":"Hash"}}`, nil, 400, "The partition key component definition path '/id ds' could not be accepted, failed near position 3"},
	{"container: hierarchical partition key path without its leading /", "POST", "dbs/db/colls", "colls", "dbs/db",
		`{"id":"pknoslash","partitionKey":{"paths":["id","/id2"],"kind":"MultiHash","version":2}}`, nil, 400, "Partition key paths must contain only valid characters"},
	{"container: partition key path with a wildcard", "POST", "dbs/db/colls", "colls", "dbs/db",
		`{"id":"pkstar","partitionKey":{"paths":["/a/*"],"kind":"Hash"}}`, nil, 400, "failed near position 3"},

	containerCase("container: indexing policy with path 5 and mode weird", `{"includedPaths":[{"path":5}],"indexingMode":"weird"}`, 400, "The indexing mode 'weird' is invalid"),
	containerCase("container: included path 5", `{"includedPaths":[{"path":5}]}`, 400, "The indexing path 5 in includedPaths[0] could not be accepted"),
	containerCase("container: excluded path without / at its start", `{"excludedPaths":[{"path":"a/?"}]}`, 400, "The indexing path 'a/?' could not be accepted, failed near position 0"),
	containerCase("container: included path without /* or /? at its end", `{"includedPaths":[{"path":"/a"}]}`, 400, "failed near position 2"),
	containerCase("container: includedPaths not a list", `{"includedPaths":"/*"}`, 400, "must be a list of paths"),
	containerCase("container: automatic not a boolean", `{"automatic":"yes"}`, 400, "automatic value 'yes' is invalid"),
	containerCase("container: indexing policy not an object", `5`, 400, "The indexingPolicy must be a JSON object"),
	containerCase("container: mode None in any case", `{"indexingMode":"None","automatic":false}`, 201, `"indexingMode":"None"`),
}

var containerCases int

func containerCase(name, policy string, status int, says string) badRequestCase {
	containerCases++
	return badRequestCase{name, "POST", "dbs/db/colls", "colls", "dbs/db",
		`{"id":"policy` + strconv.Itoa(containerCases) + `","partitionKey":{"paths":["/pk"],"kind":"Hash"},"indexingPolicy":` + policy + `}`,
		nil, status, says}
}

// badInputServer starts a server with the items and scripts the bad-input
// cases expect.
func badInputServer(t testing.TB) *orrerytest.Server {
	t.Helper()
	s := orrerytest.Start(t)
	newContainer(t, s, "db", "c", "/pk")
	for _, doc := range []string{`{"id":"n1","pk":"a","v":1}`, `{"id":"max","pk":"a","v":9223372036854775807}`, `{"id":"min","pk":"a","v":-9223372036854775808}`} {
		if st, out := scriptRequest(t, s, "POST", badColl+"/docs", "docs", badColl, []byte(doc), pkA); st != http.StatusCreated {
			t.Fatalf("seeding %s: %d %s", doc, st, out)
		}
	}
	createSproc(t, s, "db", "c", "create", `function(d){ __.createDocument(__.getSelfLink(), d, function(e, r){ if (e) throw e; getContext().getResponse().setBody(r); }); }`)
	createSproc(t, s, "db", "c", "infinity", `function(){ __.createDocument(__.getSelfLink(), {id: "inf", pk: "a", v: Infinity}, function(e, r){ if (e) throw e; getContext().getResponse().setBody(r); }); }`)
	return s
}

// TestBadInputIsAnsweredAsTheServiceAnswers is the bad-input table: each
// hostile request and the status and message it gets. A number beyond a
// double or a property named twice is a 400 wherever a JSON body is read,
// so that no client reads back a document whose meaning depends on its
// parser.
func TestBadInputIsAnsweredAsTheServiceAnswers(t *testing.T) {
	s := badInputServer(t)
	for _, tc := range badInputCases {
		status, out := scriptRequest(t, s, tc.method, tc.path, tc.rtype, tc.link, []byte(tc.body), tc.headers)
		shown := string(out)
		if len(shown) > 400 {
			shown = shown[:400] + "..."
		}
		if status != tc.status || !strings.Contains(unescapeQuotes(out), tc.says) {
			t.Errorf("%s: got %d %s\n\twant %d with %q", tc.name, status, shown, tc.status, tc.says)
			continue
		}
		t.Logf("| %s | %d | %s |", tc.name, status, shown)
	}
}

// unescapeQuotes undoes the escaping of quotes in a JSON message, so that a
// case names the quoted property as the message shows it.
func unescapeQuotes(b []byte) string { return strings.ReplaceAll(string(b), `\"`, `"`) }

// TestBadInputThroughTheGoSDK checks that the Go SDK, which sends an item's
// bytes as given, gets the 400 as a ResponseError a caller can act on, and
// that nothing of the refused writes is stored.
func TestBadInputThroughTheGoSDK(t *testing.T) {
	s := badInputServer(t)
	ctx := context.Background()
	c, err := s.Client.NewContainer("db", "c")
	if err != nil {
		t.Fatal(err)
	}
	pk := azcosmos.NewPartitionKeyString("a")
	for _, tc := range []struct{ id, body, says string }{
		{"g1", `{"id":"g1","pk":"a","v":1e400}`, outOfRange},
		{"g2", `{"id":"g2","id":"g3","pk":"a"}`, `"id" appears more than once`},
	} {
		_, err := c.CreateItem(ctx, pk, []byte(tc.body), nil)
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest || !strings.Contains(unescapeQuotes([]byte(err.Error())), tc.says) {
			t.Errorf("CreateItem %s: %v, want a 400 saying %q", tc.body, err, tc.says)
		}
		for _, id := range []string{tc.id, "g3"} {
			if _, err := c.ReadItem(ctx, pk, id, nil); statusOf(t, err) != http.StatusNotFound {
				t.Errorf("item %s after the refused create: %v, want 404", id, err)
			}
		}
	}
	ops := azcosmos.PatchOperations{}
	ops.AppendIncrement("/v", 1)
	_, err = c.PatchItem(ctx, pk, "max", ops, nil)
	if statusOf(t, err) != http.StatusBadRequest {
		t.Fatalf("incr past the 64-bit range: %v, want 400", err)
	}
	r, err := c.ReadItem(ctx, pk, "max", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ V json.Number }
	if err := json.Unmarshal(r.Value, &doc); err != nil || doc.V != "9223372036854775807" {
		t.Fatalf("after the refused incr the item holds %s, want v unchanged", r.Value)
	}
}

// hostileValues are JSON values, and some that are not JSON, that a hostile
// client sends where a value goes.
var hostileValues = []string{
	`1e400`, `-1e400`, digits400, `-` + digits400, `1e-400`, `1E+309`, `0.` + digits400, digits400 + `.5e-500`,
	`9223372036854775808`, `-9223372036854775809`, `1.7976931348623157e308`, `-0`, `0e0`,
	`NaN`, `Infinity`, `-Infinity`, `0x10`, `01`, `1.`, `.5`, `+1`,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `[{"a":1,"a":1}]`, `{"\u0061":1,"a":2}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat("}", 5000),
	`"\ud800"`, `"\u0000"`, "\"\xff\xfe\"", `"` + strings.Repeat("x", 3<<20) + `"`,
	`null`, `true`, `[]`, `{}`, `""`, ``, `{`, `[1,]`, `{"a":1}x`, "\ufeff{}",
}

// hostileBodies builds the corpus: each hostile value as a whole body, as
// an item's property, as its id, ttl and partition key, as a patch value, a
// batch operation's body and a query parameter; plus bodies broken in the
// ways clients break them.
func hostileBodies() map[string][]string {
	var item, patch, batch, query, whole, resource []string
	for _, v := range hostileValues {
		whole = append(whole, v)
		item = append(item,
			`{"id":"h","pk":"a","v":`+v+`}`, `{"id":`+v+`,"pk":"a"}`, `{"id":"h","pk":`+v+`}`,
			`{"id":"h","pk":"a","ttl":`+v+`}`, `{"id":"h","id":"h2","pk":"a","v":`+v+`}`)
		patch = append(patch,
			`{"operations":[{"op":"set","path":"/v","value":`+v+`}]}`,
			`{"operations":[{"op":"incr","path":"/v","value":`+v+`}]}`,
			`{"operations":[{"op":"add","path":"/a/-","value":`+v+`}]}`,
			`{"operations":[{"op":"set","path":`+v+`,"value":1}]}`,
			`{"condition":"FROM c WHERE c.v = 1","operations":[{"op":"incr","path":"/v","value":`+v+`}]}`)
		batch = append(batch,
			`[{"operationType":"Upsert","resourceBody":{"id":"h","pk":"a","v":`+v+`}}]`,
			`[{"operationType":"Patch","id":"n1","resourceBody":{"operations":[{"op":"incr","path":"/v","value":`+v+`}]}}]`,
			`[{"operationType":`+v+`,"resourceBody":{"id":"h","pk":"a"}}]`)
		query = append(query,
			`{"query":"SELECT * FROM c WHERE c.v = @v","parameters":[{"name":"@v","value":`+v+`}]}`,
			`{"query":`+v+`}`)
		resource = append(resource, `{"id":"r","x":`+v+`}`, `{"id":`+v+`}`,
			`{"id":"r","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":`+v+`}],"indexingMode":`+v+`,"automatic":`+v+`}}`,
			`{"id":"r","partitionKey":`+v+`}`, `{"id":"r","partitionKey":{"paths":[`+v+`]},"defaultTtl":`+v+`}`)
	}
	item = append(item, whole...)
	return map[string][]string{"item": item, "patch": append(patch, whole...), "batch": append(batch, whole...),
		"query": append(query, whole...), "resource": append(resource, whole...)}
}

// TestNoHostileInputGetsA500 sends every body of the hostile corpus to every
// endpoint that reads one: none may be answered 500 (or any 5xx), whatever
// it holds.
func TestNoHostileInputGetsA500(t *testing.T) {
	s := badInputServer(t)
	corpus := hostileBodies()
	type endpoint struct {
		name, kind, method, path, rtype, link string
		headers                               map[string]string
	}
	endpoints := []endpoint{
		{"create item", "item", "POST", badColl + "/docs", "docs", badColl, pkA},
		{"create item without a partition key", "item", "POST", badColl + "/docs", "docs", badColl, nil},
		{"upsert item", "item", "POST", badColl + "/docs", "docs", badColl, upsertA},
		{"replace item", "item", "PUT", badColl + "/docs/n1", "docs", badColl + "/docs/n1", pkA},
		{"patch item", "patch", "PATCH", badColl + "/docs/n1", "docs", badColl + "/docs/n1", pkA},
		{"batch", "batch", "POST", badColl + "/docs", "docs", badColl, batchA},
		{"bulk", "batch", "POST", badColl + "/docs", "docs", badColl, bulkHeader},
		{"query", "query", "POST", badColl + "/docs", "docs", badColl, queryHeader},
		{"execute a stored procedure", "item", "POST", badColl + "/sprocs/create", "sprocs", badColl + "/sprocs/create", pkA},
		{"create database", "resource", "POST", "dbs", "dbs", "", nil},
		{"create container", "resource", "POST", "dbs/db/colls", "colls", "dbs/db", nil},
		{"replace container", "resource", "PUT", badColl, "colls", badColl, nil},
		{"create stored procedure", "resource", "POST", badColl + "/sprocs", "sprocs", badColl, nil},
		{"create user", "resource", "POST", "dbs/db/users", "users", "dbs/db", nil},
	}
	sent := 0
	for _, ep := range endpoints {
		for _, body := range corpus[ep.kind] {
			b := []byte(body)
			if ep.name == "execute a stored procedure" {
				b = []byte("[" + body + "]")
			}
			status, out := scriptRequest(t, s, ep.method, ep.path, ep.rtype, ep.link, b, ep.headers)
			sent++
			if status >= 500 || status == 0 {
				shown := body
				if len(shown) > 120 {
					shown = shown[:120] + "..."
				}
				t.Errorf("%s with %q: %d %.300s", ep.name, shown, status, out)
			}
			if ep.kind == "batch" && status == http.StatusMultiStatus && strings.Contains(string(out), `"statusCode":5`) {
				t.Errorf("%s with %.120q: an operation answered 5xx: %.300s", ep.name, body, out)
			}
		}
	}
	t.Logf("%d hostile requests, none answered 5xx", sent)
}
