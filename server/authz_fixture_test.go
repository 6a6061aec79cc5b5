package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/storage/memory"
)

// credential kinds of the authorization tests.
const (
	credMaster    = "master"
	credReadOnly  = "read-only key"
	credAll       = "All token"
	credRead      = "Read token"
	credPartition = "partition token"
	credOther     = "other container's token"
	credExpired   = "expired token"
	credForged    = "forged token"
)

// limitedCredentials are every credential kind but the master key.
var limitedCredentials = []string{credReadOnly, credAll, credRead, credPartition, credOther, credExpired, credForged}

// authzFixture is a server with one database "db" holding container "c"
// (partition key /pk, items a1 in ["A"] and b1 in ["B"], a stored
// procedure, a trigger and a UDF, 400 RU/s of its own) and container
// "other" (item o1 in ["A"]), four users each holding one permission, and
// a token of every kind. Requests go straight to the handler.
type authzFixture struct {
	t      testing.TB
	srv    *Server
	eng    *engine.Engine
	tokens map[string]string
	// vars fill the {name} placeholders of paths and bodies.
	vars map[string]string
}

// pkSproc creates {"id": args[0], "pk": args[1]} in the partition it runs in.
const pkSproc = `{"id":"writer","body":"function (id, pk) { var c = getContext().getCollection(); ` +
	`if (!c.createDocument(c.getSelfLink(), {id: id, pk: pk}, function (err) { if (err) throw err; getContext().getResponse().setBody('wrote'); })) throw new Error('not accepted'); }"}`

func newAuthzFixture(t testing.TB) *authzFixture {
	ctx := t.Context()
	t.Helper()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey, ReadOnly: readOnlyKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); store.Close() })
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(eng.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil))
	must(eng.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), &engine.Throughput{Manual: 400}))
	must(eng.CreateContainer(ctx, "db", []byte(`{"id":"other","partitionKey":{"paths":["/pk"]}}`), nil))
	must(eng.CreateClientEncryptionKey(ctx, "db", []byte(strings.Replace(testEncryptionKey, `"id":"cek"`, `"id":"k"`, 1))))
	for _, it := range []struct{ coll, body string }{
		{"c", `{"id":"a1","pk":"A","v":1}`}, {"c", `{"id":"b1","pk":"B","secret":"seen-only-in-B"}`}, {"other", `{"id":"o1","pk":"A"}`},
	} {
		must(eng.CreateItem(ctx, &engine.ItemRequest{Database: "db", Container: it.coll, Body: []byte(it.body)}))
	}
	must(eng.CreateScript(ctx, "db", "c", engine.StoredProcedures, []byte(pkSproc)))
	must(eng.CreateScript(ctx, "db", "c", engine.Triggers, []byte(`{"id":"t","body":"function () {}","triggerType":"Pre","triggerOperation":"All"}`)))
	must(eng.CreateScript(ctx, "db", "c", engine.UserFunctions, []byte(`{"id":"f","body":"function (x) { return x; }"}`)))
	// A rule that never fires: every request of the matrix is matched
	// against it, and the fault rules' own routes have one to act on.
	must(srv.Faults().Add(faults.Rule{ID: "r1", Condition: faults.Condition{Container: "none"}, Result: faults.Result{Type: faults.Timeout}}))
	f := &authzFixture{t: t, srv: srv, eng: eng, tokens: map[string]string{}, vars: map[string]string{}}
	now := time.Now()
	for _, p := range []struct{ user, cred, body string }{
		{"ua", credAll, `{"id":"pa","permissionMode":"All","resource":"dbs/db/colls/c"}`},
		{"ur", credRead, `{"id":"pr","permissionMode":"Read","resource":"dbs/db/colls/c"}`},
		{"up", credPartition, `{"id":"pp","permissionMode":"All","resource":"dbs/db/colls/c","resourcePartitionKey":["A"]}`},
		{"uo", credOther, `{"id":"po","permissionMode":"All","resource":"dbs/db/colls/other"}`},
	} {
		must(eng.CreateUser(ctx, "db", []byte(`{"id":"`+p.user+`"}`)))
		perm, err := eng.CreatePermission(ctx, "db", p.user, []byte(p.body))
		if err != nil {
			t.Fatal(err)
		}
		if f.tokens[p.cred], err = srv.keys.mintResourceToken(perm.RID, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if p.cred == credAll {
			if f.tokens[credExpired], err = srv.keys.mintResourceToken(perm.RID, now.Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			f.tokens[credForged] = tamper(f.tokens[credAll])
		}
	}
	c, err := eng.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	f.vars["dbrid"], f.vars["collrid"] = c.Database().RID, c.RID
	for _, o := range eng.ListOffers(ctx) {
		if strings.Contains(string(o.Body), c.RID) {
			f.vars["offer"] = o.RID
		}
	}
	if f.vars["offer"] == "" {
		t.Fatal("container c has no offer")
	}
	return f
}

// expand fills the {name} placeholders of s.
func (f *authzFixture) expand(s string) string {
	for k, v := range f.vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// do sends a request with a credential; headers with an empty value are
// left out.
func (f *authzFixture) do(cred, method, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	f.t.Helper()
	path = f.expand(path)
	req := httptest.NewRequest(method, "http://orrery"+path, strings.NewReader(f.expand(body)))
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-11-05")
	switch cred {
	case credMaster, credReadOnly:
		key := EmulatorKey
		if cred == credReadOnly {
			key = readOnlyKey
		}
		rtype, rlink := signingScope(splitPath(req.URL.Path))
		auth, err := Sign(key, method, rtype, rlink, date)
		if err != nil {
			f.t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
	default:
		tok, ok := f.tokens[cred]
		if !ok {
			f.t.Fatalf("no credential %q", cred)
		}
		req.Header.Set("Authorization", url.QueryEscape(tok))
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, f.expand(v))
		}
	}
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	return rec
}

// snapshot reads everything the account holds through the master key: a
// map from each resource's name-based path to its body. Items' keys carry
// their partition key value, offers are filed under their container's
// path, and permissions' _token (minted afresh on each read) is left out.
func (f *authzFixture) snapshot() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	feed := func(path, key string) []map[string]any {
		f.t.Helper()
		rec := f.do(credMaster, "GET", path, "", map[string]string{"x-ms-max-item-count": "-1"})
		if rec.Code != 200 {
			f.t.Fatalf("snapshot: GET %s: %d %s", path, rec.Code, rec.Body)
		}
		var env map[string]json.RawMessage
		var list []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			f.t.Fatalf("snapshot: GET %s: %v", path, err)
		}
		if err := json.Unmarshal(env[key], &list); err != nil {
			f.t.Fatalf("snapshot: GET %s: %v: %s", path, err, rec.Body)
		}
		if rec.Header().Get("x-ms-continuation") != "" {
			f.t.Fatalf("snapshot: GET %s came in pages", path)
		}
		return list
	}
	put := func(key string, doc map[string]any) {
		delete(doc, "_token")
		b, _ := json.Marshal(doc)
		out[key] = string(b)
	}
	owners := map[string]string{} // _self of a database or container -> its path
	for _, db := range feed("/dbs", "Databases") {
		dbPath := "dbs/" + db["id"].(string)
		owners[db["_self"].(string)] = dbPath
		put(dbPath, db)
		for _, c := range feed("/"+dbPath+"/colls", "DocumentCollections") {
			cPath := dbPath + "/colls/" + c["id"].(string)
			owners[c["_self"].(string)] = cPath
			put(cPath, c)
			for _, it := range feed("/"+cPath+"/docs", "Documents") {
				pk, _ := json.Marshal(it["pk"])
				put(cPath+"/docs/"+it["id"].(string)+"@"+string(pk), it)
			}
			for _, k := range []string{"sprocs", "triggers", "udfs"} {
				kind, _ := engine.ParseScriptKind(k)
				for _, s := range feed("/"+cPath+"/"+k, kind.FeedKey()) {
					put(cPath+"/"+k+"/"+s["id"].(string), s)
				}
			}
		}
		for _, u := range feed("/"+dbPath+"/users", "Users") {
			uPath := dbPath + "/users/" + u["id"].(string)
			put(uPath, u)
			for _, p := range feed("/"+uPath+"/permissions", "Permissions") {
				put(uPath+"/permissions/"+p["id"].(string), p)
			}
		}
	}
	for _, o := range feed("/offers", "Offers") {
		owner, _ := o["resource"].(string)
		if p, ok := owners[strings.Trim(owner, "/")+"/"]; ok {
			owner = p
		} else if p, ok := owners[owner]; ok {
			owner = p
		}
		put(owner+"/offer:"+o["id"].(string), o)
	}
	for _, r := range f.srv.Faults().List() {
		b, _ := json.Marshal(r.Rule)
		out["_admin/faults/"+r.ID] = string(b)
	}
	return out
}

// mayChange reports whether a credential's grant covers the resource at a
// snapshot key: the All token container c and all below it, the partition
// token c's items in partition ["A"], the other container's token
// container "other" and all below it; the rest nothing.
func mayChange(cred, key string) bool {
	under := func(prefix string) bool { return key == prefix || strings.HasPrefix(key, prefix+"/") }
	switch cred {
	case credMaster:
		return true
	case credAll:
		return under("dbs/db/colls/c")
	case credOther:
		return under("dbs/db/colls/other")
	case credPartition:
		return strings.HasPrefix(key, "dbs/db/colls/c/docs/") && strings.HasSuffix(key, `@"A"`)
	}
	return false
}

// changedOutside lists the snapshot keys that differ between before and
// after and that cred's grant does not cover.
func changedOutside(cred string, before, after map[string]string) []string {
	var bad []string
	for k, v := range before {
		if after[k] != v && !mayChange(cred, k) {
			bad = append(bad, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok && !mayChange(cred, k) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad
}
