package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// fuzzRequest is one request a hostile holder of a limited credential sends.
type fuzzRequest struct {
	method, path, body string
	headers            map[string]string
}

func (r fuzzRequest) String() string {
	return fmt.Sprintf("%s %s body=%q headers=%v", r.method, r.path, r.body, r.headers)
}

var (
	fuzzMethods = []string{"GET", "HEAD", "POST", "POST", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	fuzzPaths   = []string{"/", "/dbs", "/dbs/db", "/dbs/{dbrid}", "/dbs/db2", "/dbs/db/colls", "/dbs/db/colls/c",
		"/dbs/{dbrid}/colls/{collrid}", "/dbs/db/colls/other", "/dbs/db/colls/c/docs", "/dbs/{dbrid}/colls/{collrid}/docs",
		"/dbs/db/colls/c/docs/a1", "/dbs/db/colls/c/docs/b1", "/dbs/db/colls/c/docs/a9", "/dbs/db/colls/other/docs",
		"/dbs/db/colls/other/docs/o1", "/dbs/db/colls/c/pkranges", "/dbs/db/colls/c/sprocs", "/dbs/db/colls/c/sprocs/writer",
		"/dbs/{dbrid}/colls/{collrid}/sprocs/writer", "/dbs/db/colls/c/triggers", "/dbs/db/colls/c/triggers/t",
		"/dbs/db/colls/c/udfs", "/dbs/db/colls/c/udfs/f", "/dbs/db/colls/other/sprocs", "/dbs/db/users", "/dbs/db/users/ua",
		"/dbs/db/users/up/permissions", "/dbs/db/users/up/permissions/pp", "/offers", "/offers/{offer}",
		"/dbs/db/colls/c/docs/b1/attachments", "/dbs/db/colls/c/conflicts"}
	fuzzPKs    = []string{`["A"]`, `["A"]`, `["B"]`, `["B"]`, `["A","B"]`, `[]`, `[{}]`, `A`, `[null]`, `[1]`}
	fuzzBodies = []string{
		``, `{`, `[]`, `null`,
		`{"id":"a9","pk":"A"}`, `{"id":"b9","pk":"B"}`, `{"id":"b1","pk":"B","secret":"stolen"}`, `{"id":"a1","pk":"B"}`, `{"id":"a1","pk":"A","v":7}`,
		`{"query":"SELECT * FROM c"}`, `{"query":"SELECT * FROM c WHERE c.pk = 'B'"}`,
		`{"operations":[{"op":"set","path":"/pk","value":"B"}]}`, `{"operations":[{"op":"set","path":"/x","value":1}]}`,
		`["z1","A"]`, `["z2","B"]`, `["z3"]`,
		`[{"operationType":"Read","id":"b1","partitionKey":"[\"B\"]"}]`,
		`[{"operationType":"Delete","id":"b1","partitionKey":"[\"B\"]"},{"operationType":"Upsert","resourceBody":{"id":"b8","pk":"B"}}]`,
		`[{"operationType":"Create","resourceBody":{"id":"b7","pk":"B"}},{"operationType":"Read","id":"a1","partitionKey":"[\"A\"]"}]`,
		`[{"operationType":"Replace","id":"b1","resourceBody":{"id":"b1","pk":"B","v":1}}]`,
		`[{"operationType":"Patch","id":"b1","partitionKey":"[\"B\"]","resourceBody":{"operations":[{"op":"remove","path":"/secret"}]}}]`,
		`[{"operationType":"Upsert","resourceBody":{"id":"a8","pk":"A"}},{"operationType":"Delete","id":"a1"}]`,
		`{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`,
		`{"id":"other","partitionKey":{"paths":["/pk"]},"defaultTtl":1}`, `{"id":"c9","partitionKey":{"paths":["/pk"]}}`,
		`{"id":"writer","body":"function () { getContext().getResponse().setBody(1); }"}`,
		`{"id":"t","body":"function () {}","triggerType":"Pre","triggerOperation":"All"}`,
		`{"id":"pp","permissionMode":"All","resource":"dbs/db/colls/c"}`, `{"id":"ua"}`, `{"id":"db2"}`,
		`{"content":{"offerThroughput":1000}}`,
	}
)

// fuzzBodiesFor returns the bodies of fuzzBodies a route on path takes.
func fuzzBodiesFor(path string) []string {
	var prefixes []string
	switch segs := splitPath(path); {
	case len(segs) == 5 && segs[4] == "docs":
		prefixes = []string{`{"id"`, `{"query"`, `[{"operationType"`}
	case len(segs) == 6 && segs[4] == "docs":
		prefixes = []string{`{"id"`, `{"operations"`}
	case len(segs) == 6 && segs[4] == "sprocs":
		prefixes = []string{`["z`, `{"id":"writer"`}
	case len(segs) >= 5:
		prefixes = []string{`{"id":"writer"`, `{"id":"t"`, `{"query"`}
	case len(segs) == 4 || len(segs) == 3:
		prefixes = []string{`{"id":"c`, `{"id":"other"`, `{"query"`}
	case len(segs) > 0 && segs[0] == "offers":
		prefixes = []string{`{"content"`, `{"query"`}
	default:
		prefixes = []string{`{"id":"`, `{"query"`}
	}
	var out []string
	for _, b := range fuzzBodies {
		for _, p := range prefixes {
			if strings.HasPrefix(b, p) {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// randomRequest draws a request from rng: any method on any path of the
// account, with routing headers (query, upsert, batch, partition key, change
// feed, query plan, triggers) and a body in any of the shapes a route takes.
func randomRequest(rng *rand.Rand) fuzzRequest {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	r := fuzzRequest{method: pick(fuzzMethods), path: pick(fuzzPaths), body: pick(fuzzBodies), headers: map[string]string{}}
	// Mostly a body of the shape the path takes, so that requests get past
	// parsing to where access matters.
	if fit := fuzzBodiesFor(r.path); len(fit) > 0 && rng.IntN(4) > 0 {
		r.body = pick(fit)
	}
	odds := 3
	if rng.IntN(2) == 0 {
		// Half start from a well-formed request of the matrix, mutated a
		// little: another partition key, a header more, another body.
		rows := authzMatrix()
		row := rows[rng.IntN(len(rows))]
		r = fuzzRequest{method: row.method, path: row.path, body: row.body, headers: map[string]string{}}
		for k, v := range row.headers {
			r.headers[k] = v
		}
		if rng.IntN(3) == 0 {
			r.body = pick(fuzzBodies)
		}
		odds = 8
	}
	maybe := func(name string, values ...string) {
		if rng.IntN(odds) == 0 {
			r.headers[name] = values[rng.IntN(len(values))]
		}
	}
	maybe(hIsQuery, "true", "True", "false")
	maybe(hCT, ctQuery, "application/json", "application/json-patch+json")
	maybe("x-ms-documentdb-query", "true")
	maybe("x-ms-cosmos-is-query-plan-request", "True")
	maybe(hUpsert, "true")
	maybe(hBatch, "true", "True")
	maybe(hAtomic, "false", "true", `"false"`)
	maybe(hPK, fuzzPKs...)
	maybe(hPK, `["A"]`, `["B"]`)
	maybe("x-ms-documentdb-partitionkeyrangeid", "0", "1")
	maybe("A-IM", "Incremental Feed", "Full-Fidelity Feed")
	maybe("x-ms-documentdb-pre-trigger-include", "t")
	maybe("If-Match", "*")
	maybe("x-ms-documentdb-expiry-seconds", "18000")
	return r
}

// fuzzCredential sends n random requests drawn from seed with one limited
// credential and checks after each that nothing outside the credential's
// grant changed (a snapshot of everything, read with the master key), and
// that expired and forged tokens get 401 every time. It stops early at
// deadline.
func fuzzCredential(t *testing.T, cred string, seed uint64, n int, deadline time.Time) int {
	f := newAuthzFixture(t)
	rng := rand.New(rand.NewPCG(seed, uint64(len(cred))))
	before := f.snapshot()
	sent := 0
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		req := randomRequest(rng)
		rec := f.do(cred, req.method, req.path, req.body, req.headers)
		sent++
		if (cred == credExpired || cred == credForged) && rec.Code != 401 {
			t.Fatalf("%s, request %d (%s): status %d, want 401: %s", cred, i, req, rec.Code, rec.Body)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s, request %d (%s): status %d: %s", cred, i, req, rec.Code, rec.Body)
		}
		if cred == credPartition && strings.Contains(rec.Body.String(), "seen-only-in-B") {
			t.Fatalf("%s, request %d (%s): partition B's item came back: %s", cred, i, req, rec.Body)
		}
		after := f.snapshot()
		if bad := changedOutside(cred, before, after); len(bad) > 0 {
			t.Fatalf("%s, request %d (%s): status %d, changed what its grant does not cover: %v\n%s", cred, i, req, rec.Code, bad, rec.Body)
		}
		before = after
	}
	return sent
}

// TestLimitedCredentialsFuzz sends random method/path/header/body
// combinations with every limited credential, from fixed seeds, a bounded
// number of requests within a bounded time, and checks that nothing outside
// each credential's grant changed.
func TestLimitedCredentialsFuzz(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 100
	}
	// A time bound that holds on a loaded machine: past it the test stops
	// sending (and says how far it got) rather than fail.
	deadline := time.Now().Add(40 * time.Second)
	for i, cred := range limitedCredentials {
		t.Run(cred, func(t *testing.T) {
			n := n
			if cred == credExpired || cred == credForged {
				n /= 5 // refused before anything is looked at
			}
			sent := fuzzCredential(t, cred, uint64(1000+i), n, deadline)
			if sent < n {
				t.Logf("%s: sent %d of %d requests before the time bound", cred, sent, n)
			}
		})
	}
}

// FuzzLimitedCredentials is TestLimitedCredentialsFuzz under the fuzzer:
// go test ./server -run '^$' -fuzz FuzzLimitedCredentials.
func FuzzLimitedCredentials(f *testing.F) {
	for i := range limitedCredentials {
		f.Add(uint64(i*7919), uint8(i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, which uint8) {
		cred := limitedCredentials[int(which)%len(limitedCredentials)]
		fuzzCredential(t, cred, seed, 20, time.Now().Add(10*time.Second))
	})
}
