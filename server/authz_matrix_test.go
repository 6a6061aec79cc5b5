package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// matrixRow is one request of the route x credential matrix.
type matrixRow struct {
	method, path, body string
	headers            map[string]string
	// status is the answer to the credentials in may (letters: M master,
	// K read-only key, A All token on c, R Read token on c, P All token on
	// c for partition ["A"], O All token on container "other").
	status int
	may    string
	// except gives other statuses for some credentials (a bulk request
	// whose operations are refused one by one answers 207); they must
	// change nothing either.
	except map[string]int
}

var credLetters = map[string]byte{credMaster: 'M', credReadOnly: 'K', credAll: 'A', credRead: 'R', credPartition: 'P', credOther: 'O'}

// want is the status a credential gets; changes is whether it may change
// anything.
func (r *matrixRow) want(cred string) (status int, changes bool) {
	if cred == credExpired || cred == credForged {
		return 401, false
	}
	if s, ok := r.except[cred]; ok {
		return s, false
	}
	if strings.IndexByte(r.may, credLetters[cred]) >= 0 {
		return r.status, r.method != "GET" && r.method != "HEAD"
	}
	return 403, false
}

func hdr(kv ...string) map[string]string {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

const (
	hPK      = "x-ms-documentdb-partitionkey"
	hIsQuery = "x-ms-documentdb-isquery"
	hCT      = "Content-Type"
	hBatch   = "x-ms-cosmos-is-batch-request"
	hAtomic  = "x-ms-cosmos-batch-atomic"
	hUpsert  = "x-ms-documentdb-is-upsert"
	ctQuery  = "application/query+json"
	pkA      = `["A"]`
	pkB      = `["B"]`
	anyQuery = `{"query":"SELECT * FROM c"}`
)

func scriptRows(kind, id, create, replace string) []matrixRow {
	base := "/dbs/db/colls/c/" + kind
	return []matrixRow{
		{"GET", base, "", nil, 200, "MKAR", nil},
		{"POST", base, anyQuery, hdr(hIsQuery, "true", hCT, ctQuery), 200, "MKAR", nil},
		{"POST", base, create, nil, 201, "MA", nil},
		{"GET", base + "/" + id, "", nil, 200, "MKAR", nil},
		{"PUT", base + "/" + id, replace, nil, 200, "MA", nil},
		{"DELETE", base + "/" + id, "", nil, 204, "MA", nil},
	}
}

// authzMatrix walks every operation of the operations table.
func authzMatrix() []matrixRow {
	q := func(extra ...string) map[string]string {
		return hdr(append([]string{hIsQuery, "true", hCT, ctQuery}, extra...)...)
	}
	rows := []matrixRow{
		{"GET", "/", "", nil, 200, "MKARPO", nil},

		{"GET", "/dbs", "", nil, 200, "MK", nil},
		{"POST", "/dbs", anyQuery, q(), 200, "MK", nil},
		{"POST", "/dbs", `{"id":"db2"}`, nil, 201, "M", nil},
		{"GET", "/dbs/db", "", nil, 200, "MK", nil},
		{"DELETE", "/dbs/db", "", nil, 204, "M", nil},

		{"GET", "/dbs/db/colls", "", nil, 200, "MK", nil},
		{"POST", "/dbs/db/colls", anyQuery, q(), 200, "MK", nil},
		{"POST", "/dbs/db/colls", `{"id":"c2","partitionKey":{"paths":["/pk"]}}`, nil, 201, "M", nil},
		{"GET", "/dbs/db/colls/c", "", nil, 200, "MKARP", nil},
		{"GET", "/dbs/{dbrid}/colls/{collrid}", "", nil, 200, "MKARP", nil},
		{"PUT", "/dbs/db/colls/c", `{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`, nil, 200, "MA", nil},
		{"DELETE", "/dbs/db/colls/c", "", nil, 204, "MA", nil},
		{"DELETE", "/dbs/{dbrid}/colls/{collrid}", "", hdr(hPK, pkA), 204, "MA", nil},
		{"GET", "/dbs/db/colls/c/pkranges", "", nil, 200, "MKARP", nil},
		{"GET", "/dbs/db/colls/c/conflicts", "", nil, 200, "MKARP", nil},
		{"POST", "/dbs/db/colls/c/conflicts", anyQuery, q(), 200, "MKARP", nil},
		{"GET", "/dbs/db/colls/c/conflicts/x", "", nil, 404, "MKARP", nil},
		{"DELETE", "/dbs/db/colls/c/conflicts/x", "", nil, 404, "MA", nil},
		{"POST", "/dbs/db/colls/c/operations/partitionkeydelete", "", hdr(hPK, pkA), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/operations/partitionkeydelete", "", hdr(hPK, pkB), 200, "MA", nil},

		{"POST", "/dbs/db/colls/c/docs", `{"id":"a2","pk":"A"}`, hdr(hPK, pkA), 201, "MAP", nil},
		{"POST", "/dbs/db/colls/c/docs", `{"id":"b2","pk":"B"}`, hdr(hPK, pkB), 201, "MA", nil},
		{"POST", "/dbs/db/colls/c/docs", `{"id":"a1","pk":"A","v":2}`, hdr(hPK, pkA, hUpsert, "true"), 200, "MAP", nil},
		{"GET", "/dbs/db/colls/c/docs", "", hdr(hPK, pkA), 200, "MKARP", nil},
		{"GET", "/dbs/db/colls/c/docs", "", nil, 200, "MKAR", nil},
		{"GET", "/dbs/db/colls/c/docs", "", hdr(hPK, pkA, "A-IM", "Incremental Feed"), 200, "MKARP", nil},
		{"GET", "/dbs/db/colls/c/docs", "", hdr("A-IM", "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid", "0"), 200, "MKAR", nil},
		{"POST", "/dbs/db/colls/c/docs", anyQuery, q(hPK, pkA), 200, "MKARP", nil},
		{"POST", "/dbs/db/colls/c/docs", anyQuery, q("x-ms-documentdb-partitionkeyrangeid", "0"), 200, "MKAR", nil},
		{"POST", "/dbs/db/colls/c/docs", anyQuery, q("x-ms-cosmos-is-query-plan-request", "True"), 200, "MKARP", nil},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"a1"},{"operationType":"Upsert","resourceBody":{"id":"a1","pk":"A","v":2}}]`,
			hdr(hBatch, "true", hPK, pkA), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"a1"}]`, hdr(hBatch, "true", hPK, pkA), 200, "MKARP", nil},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"b1"}]`, hdr(hBatch, "true", hPK, pkB), 200, "MKAR", nil},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"a1","partitionKey":"[\"A\"]"},{"operationType":"Create","resourceBody":{"id":"a3","pk":"A"}}]`,
			hdr(hBatch, "true", hAtomic, "false"), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Read","id":"b1","partitionKey":"[\"B\"]"}]`,
			hdr(hBatch, "true", hAtomic, "false", hPK, pkA), 200, "MKAR", map[string]int{credPartition: 207}},
		{"POST", "/dbs/db/colls/c/docs", `[{"operationType":"Upsert","partitionKey":"[\"B\"]","resourceBody":{"id":"b1","pk":"B","v":9}},{"operationType":"Create","resourceBody":{"id":"b4","pk":"B"}},{"operationType":"Delete","id":"b1","partitionKey":"[\"B\"]"}]`,
			hdr(hBatch, "true", hAtomic, "false"), 200, "MA", map[string]int{credPartition: 207}},
		{"GET", "/dbs/db/colls/c/docs/a1", "", hdr(hPK, pkA), 200, "MKARP", nil},
		{"GET", "/dbs/db/colls/c/docs/b1", "", hdr(hPK, pkB), 200, "MKAR", nil},
		{"PUT", "/dbs/db/colls/c/docs/a1", `{"id":"a1","pk":"A","v":3}`, hdr(hPK, pkA), 200, "MAP", nil},
		{"PATCH", "/dbs/db/colls/c/docs/a1", `{"operations":[{"op":"set","path":"/v","value":4}]}`, hdr(hPK, pkA), 200, "MAP", nil},
		{"DELETE", "/dbs/db/colls/c/docs/a1", "", hdr(hPK, pkA), 204, "MAP", nil},
		{"DELETE", "/dbs/db/colls/c/docs/b1", "", hdr(hPK, pkB), 204, "MA", nil},
		{"GET", "/dbs/db/colls/other/docs/o1", "", hdr(hPK, pkA), 200, "MKO", nil},
		{"DELETE", "/dbs/db/colls/other", "", nil, 204, "MO", nil},

		{"POST", "/dbs/db/colls/c/sprocs/writer", `["s1","A"]`, hdr(hPK, pkA), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/sprocs/writer", `["s1","A"]`, q(hPK, pkA), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/sprocs/writer", `["s1","A"]`, hdr(hPK, pkA, "x-ms-cosmos-is-query-plan-request", "True"), 200, "MAP", nil},
		{"POST", "/dbs/db/colls/c/sprocs/writer", `["s1","B"]`, hdr(hPK, pkB), 200, "MA", nil},

		{"GET", "/dbs/db/clientencryptionkeys", "", nil, 200, "MKARPO", nil},
		{"POST", "/dbs/db/clientencryptionkeys", anyQuery, q(), 200, "MKARPO", nil},
		{"POST", "/dbs/db/clientencryptionkeys", strings.Replace(testEncryptionKey, `"id":"cek"`, `"id":"k2"`, 1), nil, 201, "M", nil},
		{"GET", "/dbs/db/clientencryptionkeys/k", "", nil, 200, "MKARPO", nil},
		{"PUT", "/dbs/db/clientencryptionkeys/k", strings.Replace(testEncryptionKey, `"id":"cek"`, `"id":"k"`, 1), nil, 200, "M", nil},

		{"GET", "/dbs/db/users", "", nil, 200, "MK", nil},
		{"POST", "/dbs/db/users", anyQuery, q(), 200, "MK", nil},
		{"POST", "/dbs/db/users", `{"id":"v"}`, nil, 201, "M", nil},
		{"POST", "/dbs/db/users", `{"id":"v"}`, hdr(hUpsert, "true"), 201, "M", nil},
		{"GET", "/dbs/db/users/ua", "", nil, 200, "MK", nil},
		{"PUT", "/dbs/db/users/ua", `{"id":"ua"}`, nil, 200, "M", nil},
		{"DELETE", "/dbs/db/users/ur", "", nil, 204, "M", nil},

		{"GET", "/dbs/db/users/ua/permissions", "", nil, 200, "M", nil},
		{"POST", "/dbs/db/users/ua/permissions", anyQuery, q(), 200, "M", nil},
		{"POST", "/dbs/db/users/ua/permissions", `{"id":"px","permissionMode":"All","resource":"dbs/db/colls/other"}`, nil, 201, "M", nil},
		{"POST", "/dbs/db/users/ua/permissions", `{"id":"px","permissionMode":"All","resource":"dbs/db/colls/other"}`, hdr(hUpsert, "true"), 201, "M", nil},
		{"GET", "/dbs/db/users/ua/permissions/pa", "", nil, 200, "M", nil},
		{"PUT", "/dbs/db/users/ur/permissions/pr", `{"id":"pr","permissionMode":"All","resource":"dbs/db/colls/c"}`, nil, 200, "M", nil},
		{"DELETE", "/dbs/db/users/ua/permissions/pa", "", nil, 204, "M", nil},

		{"GET", "/offers", "", nil, 200, "MK", nil},
		{"POST", "/offers", `{"query":"SELECT * FROM root"}`, q(), 200, "MK", nil},
		{"GET", "/offers/{offer}", "", nil, 200, "MK", nil},
		{"PUT", "/offers/{offer}", `{"content":{"offerThroughput":500}}`, nil, 200, "M", nil},

		{"GET", "/_admin/faults", "", nil, 200, "M", nil},
		{"POST", "/_admin/faults", `{"id":"r2","condition":{"container":"none"},"result":{"type":"Timeout"}}`, nil, 201, "M", nil},
		{"DELETE", "/_admin/faults", "", nil, 200, "M", nil},
		{"GET", "/_admin/faults/r1", "", nil, 200, "M", nil},
		{"DELETE", "/_admin/faults/r1", "", nil, 204, "M", nil},
	}
	rows = append(rows, scriptRows("sprocs", "writer", `{"id":"s2","body":"function () {}"}`, pkSproc)...)
	rows = append(rows, scriptRows("triggers", "t",
		`{"id":"t2","body":"function () {}","triggerType":"Post","triggerOperation":"Create"}`,
		`{"id":"t","body":"function () { throw new Error('no'); }","triggerType":"Pre","triggerOperation":"All"}`)...)
	rows = append(rows, scriptRows("udfs", "f", `{"id":"g","body":"function () { return 2; }"}`, `{"id":"f","body":"function () { return 3; }"}`)...)
	return rows
}

// TestRouteCredentialMatrix sends every route of the operations table
// with every kind of credential and checks each answer; a refused request
// must change nothing (a snapshot of everything, read with the master key,
// is the same after it), and an allowed one nothing outside its grant.
// Every operation of the table must have a row here.
func TestRouteCredentialMatrix(t *testing.T) {
	rows := authzMatrix()
	covered := map[operation]bool{}
	creds := append([]string{credMaster}, limitedCredentials...)
	for _, row := range rows {
		req := httptest.NewRequest(row.method, "http://orrery"+row.path, nil)
		for k, v := range row.headers {
			req.Header.Set(k, v)
		}
		op, _, err := classify(req, splitPath(req.URL.Path))
		if err != nil {
			t.Fatalf("%s %s: the matrix row names no operation: %v", row.method, row.path, err)
		}
		covered[op] = true
		name := fmt.Sprintf("%s/%s_%s", op, row.method, row.path)
		t.Run(name, func(t *testing.T) {
			// One fixture for the credentials that must change nothing,
			// a fresh one for each that may.
			var shared *authzFixture
			for _, cred := range creds {
				status, changes := row.want(cred)
				f := shared
				if changes {
					f = newAuthzFixture(t)
				} else if f == nil {
					shared = newAuthzFixture(t)
					f = shared
				}
				before := f.snapshot()
				rec := f.do(cred, row.method, row.path, row.body, row.headers)
				if rec.Code != status {
					t.Errorf("%s: status %d, want %d: %s", cred, rec.Code, status, rec.Body)
					continue
				}
				if status >= 400 && !strings.Contains(rec.Body.String(), `"code":`) {
					t.Errorf("%s: %d without a Cosmos error body: %s", cred, status, rec.Body)
				}
				after := f.snapshot()
				if changes {
					if bad := changedOutside(cred, before, after); len(bad) > 0 {
						t.Errorf("%s: changed what its grant does not cover: %v", cred, bad)
					}
				} else if !reflect.DeepEqual(before, after) {
					t.Errorf("%s (%d) changed data: %v", cred, rec.Code, changedOutside("", before, after))
				}
				if cred == credPartition && status == 207 {
					if strings.Contains(rec.Body.String(), `"statusCode":2`) || !strings.Contains(rec.Body.String(), `"statusCode":403`) {
						t.Errorf("%s: operations outside its partition ran: %s", cred, rec.Body)
					}
				}
			}
		})
	}
	var missing []string
	for op := range operations {
		if !covered[op] {
			missing = append(missing, op.String())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations with no row in the route x credential matrix: %v", missing)
	}
}

// TestEveryOperationHasAnAccessRow enumerates requests of every path shape,
// method and routing header, and checks that each one the router accepts
// names an operation with a complete row in the operations table (what it
// needs, how far it reaches, the code that performs it). A route added
// without its row fails here, and the server refuses it (500) meanwhile.
func TestEveryOperationHasAnAccessRow(t *testing.T) {
	for op, rt := range operations {
		if rt.need == needUnset || rt.reach == reachUnset || rt.serve == nil {
			t.Errorf("operation %s has an incomplete row: %+v", op, rt)
		}
	}
	paths := []string{"/", "/offers", "/offers/x", "/offers/x/y", "/dbs", "/dbs/db", "/dbs/db/users", "/dbs/db/users/u",
		"/dbs/db/users/u/permissions", "/dbs/db/users/u/permissions/p", "/dbs/db/users/u/x", "/dbs/db/users/u/permissions/p/x",
		"/dbs/db/colls", "/dbs/db/colls/c", "/dbs/db/colls/c/docs", "/dbs/db/colls/c/docs/i", "/dbs/db/colls/c/docs/i/attachments",
		"/dbs/db/colls/c/pkranges", "/dbs/db/colls/c/pkranges/0", "/dbs/db/colls/c/conflicts", "/dbs/db/colls/c/conflicts/x", "/dbs/db/x", "/x",
		"/dbs/db/colls/c/operations", "/dbs/db/colls/c/operations/partitionkeydelete", "/dbs/db/colls/c/operations/x",
		"/dbs/db/clientencryptionkeys", "/dbs/db/clientencryptionkeys/k", "/dbs/db/clientencryptionkeys/k/x",
		"/_admin", "/_admin/faults", "/_admin/faults/r", "/_admin/faults/r/x", "/_admin/x"}
	for _, k := range []string{"sprocs", "triggers", "udfs"} {
		paths = append(paths, "/dbs/db/colls/c/"+k, "/dbs/db/colls/c/"+k+"/s")
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
	headerSets := []map[string]string{nil, hdr(hIsQuery, "true"), hdr(hCT, ctQuery), hdr("x-ms-documentdb-query", "true"),
		hdr("x-ms-cosmos-is-query-plan-request", "true"), hdr(hUpsert, "true"), hdr(hBatch, "true"), hdr(hBatch, "true", hAtomic, "false"),
		hdr("A-IM", "Incremental Feed"), hdr("A-IM", "Full-Fidelity Feed")}
	seen := map[operation]bool{}
	for _, p := range paths {
		for _, m := range methods {
			for _, h := range headerSets {
				req := httptest.NewRequest(m, "http://orrery"+p, nil)
				for k, v := range h {
					req.Header.Set(k, v)
				}
				op, _, err := classify(req, splitPath(req.URL.Path))
				if err != nil {
					if s := engine.StatusOf(err); s != http.StatusBadRequest && s != http.StatusMethodNotAllowed {
						t.Errorf("%s %s %v: %v", m, p, h, err)
					}
					continue
				}
				seen[op] = true
				if _, ok := operations[op]; !ok {
					t.Errorf("%s %s %v: operation %s has no row in the operations table", m, p, h, op)
				}
			}
		}
	}
	for op := range operations {
		if !seen[op] {
			t.Errorf("operation %s of the table is never named by the router", op)
		}
	}
}
