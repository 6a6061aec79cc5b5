package script

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// fakeCollection is an in-memory Collection for the tests: one partition,
// documents by id, and a tiny query matcher for "SELECT * FROM c [WHERE
// c.f = @p AND ...]". It records the writes made through it.
type fakeCollection struct {
	mu     sync.Mutex
	docs   map[string]map[string]any
	seq    int
	writes []string
	reads  int
}

type statusErr struct {
	status int
	msg    string
}

func (e *statusErr) Error() string   { return e.msg }
func (e *statusErr) StatusCode() int { return e.status }

func newFakeCollection(docs ...string) *fakeCollection {
	f := &fakeCollection{docs: map[string]map[string]any{}}
	for _, d := range docs {
		if _, err := f.CreateDocument(context.Background(), json.RawMessage(d), WriteOptions{}); err != nil {
			panic(err)
		}
	}
	f.writes = nil
	return f
}

const (
	fakeSelf = "dbs/AAAAAA==/colls/AAAAAAAAAAA=/"
	fakeAlt  = "dbs/shop/colls/orders"
)

func (f *fakeCollection) SelfLink() string { return fakeSelf }
func (f *fakeCollection) AltLink() string  { return fakeAlt }

// idOf resolves a name-based or RID document link to an id.
func (f *fakeCollection) idOf(link string) (string, error) {
	l := strings.Trim(link, "/")
	if id, ok := strings.CutPrefix(l, fakeAlt+"/docs/"); ok {
		return id, nil
	}
	if rid, ok := strings.CutPrefix(l, strings.Trim(fakeSelf, "/")+"/docs/"); ok {
		for id, d := range f.docs {
			if d["_rid"] == rid {
				return id, nil
			}
		}
		return "", &statusErr{404, "Entity with the specified id does not exist in the system."}
	}
	return "", &statusErr{400, "bad link " + link}
}

func (f *fakeCollection) get(link string) (map[string]any, error) {
	id, err := f.idOf(link)
	if err != nil {
		return nil, err
	}
	d, ok := f.docs[id]
	if !ok {
		return nil, &statusErr{404, "Entity with the specified id does not exist in the system."}
	}
	return d, nil
}

func (f *fakeCollection) ReadDocument(_ context.Context, link string, o ReadOptions) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	d, err := f.get(link)
	if err != nil {
		return nil, err
	}
	if o.IfNoneMatch != "" && o.IfNoneMatch == d["_etag"] {
		return nil, &statusErr{304, "not modified"}
	}
	return json.Marshal(d)
}

func (f *fakeCollection) sorted() []map[string]any {
	ids := make([]string, 0, len(f.docs))
	for id := range f.docs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		out[i] = f.docs[id]
	}
	return out
}

func page(docs []map[string]any, o FeedOptions) (Page, error) {
	start := 0
	if o.Continuation != "" {
		start, _ = strconv.Atoi(o.Continuation)
	}
	end := len(docs)
	if o.PageSize > 0 && start+o.PageSize < end {
		end = start + o.PageSize
	}
	var p Page
	for _, d := range docs[start:end] {
		b, _ := json.Marshal(d)
		p.Documents = append(p.Documents, b)
	}
	if end < len(docs) {
		p.Continuation = strconv.Itoa(end)
	}
	return p, nil
}

func (f *fakeCollection) ReadDocuments(_ context.Context, o FeedOptions) (Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return page(f.sorted(), o)
}

var whereTerm = regexp.MustCompile(`^c\.(\w+)\s*=\s*(@\w+)$`)

func (f *fakeCollection) QueryDocuments(_ context.Context, q Query, o FeedOptions) (Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	text := strings.TrimSpace(q.Text)
	rest, ok := strings.CutPrefix(text, "SELECT * FROM c")
	if !ok {
		return Page{}, &statusErr{400, "fake: unsupported query " + text}
	}
	params := map[string]any{}
	for _, p := range q.Parameters {
		var v any
		if err := json.Unmarshal(p.Value, &v); err != nil {
			return Page{}, &statusErr{400, "fake: bad parameter"}
		}
		params[p.Name] = v
	}
	var conds [][2]string
	if where, ok := strings.CutPrefix(strings.TrimSpace(rest), "WHERE "); ok {
		for _, term := range strings.Split(where, " AND ") {
			m := whereTerm.FindStringSubmatch(strings.TrimSpace(term))
			if m == nil {
				return Page{}, &statusErr{400, "fake: unsupported condition " + term}
			}
			conds = append(conds, [2]string{m[1], m[2]})
		}
	}
	var out []map[string]any
	for _, d := range f.sorted() {
		match := true
		for _, c := range conds {
			if fmt.Sprint(d[c[0]]) != fmt.Sprint(params[c[1]]) {
				match = false
			}
		}
		if match {
			out = append(out, d)
		}
	}
	return page(out, o)
}

func (f *fakeCollection) store(doc json.RawMessage, op string) (json.RawMessage, error) {
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, &statusErr{400, "invalid document"}
	}
	id, _ := d["id"].(string)
	if id == "" {
		return nil, &statusErr{400, "The input content is invalid because the required properties - 'id; ' - are missing"}
	}
	rid := "AAAAAAAAAAABAAAAAAAAAA=="
	if old, ok := f.docs[id]; ok {
		rid = old["_rid"].(string)
	} else {
		f.seq++
		rid = fmt.Sprintf("AAAAAAAAAAA%05d==", f.seq)
	}
	f.seq++
	d["_rid"] = rid
	d["_self"] = fakeSelf + "docs/" + rid + "/"
	d["_etag"] = fmt.Sprintf("\"%08d\"", f.seq)
	d["_ts"] = 1700000000 + f.seq
	f.docs[id] = d
	f.writes = append(f.writes, op+" "+id)
	return json.Marshal(d)
}

func (f *fakeCollection) CreateDocument(_ context.Context, doc json.RawMessage, _ WriteOptions) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d struct{ ID string }
	_ = json.Unmarshal(doc, &d)
	if _, ok := f.docs[d.ID]; ok {
		return nil, &statusErr{409, "Entity with the specified id already exists in the system."}
	}
	return f.store(doc, "create")
}

func (f *fakeCollection) UpsertDocument(_ context.Context, doc json.RawMessage, _ WriteOptions) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.store(doc, "upsert")
}

func (f *fakeCollection) ReplaceDocument(_ context.Context, link string, doc json.RawMessage, o WriteOptions) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.get(link)
	if err != nil {
		return nil, err
	}
	if o.IfMatch != "" && o.IfMatch != old["_etag"] {
		return nil, &statusErr{412, "One of the specified pre-condition is not met."}
	}
	var d struct{ ID string }
	_ = json.Unmarshal(doc, &d)
	if d.ID != old["id"] {
		return nil, &statusErr{400, "The id of the document does not match its link."}
	}
	return f.store(doc, "replace")
}

func (f *fakeCollection) PatchDocument(_ context.Context, link string, patch json.RawMessage, _ WriteOptions) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.get(link)
	if err != nil {
		return nil, err
	}
	var ops []struct {
		Op    string
		Path  string
		Value any
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		var spec struct {
			Operations json.RawMessage
		}
		if json.Unmarshal(patch, &spec) != nil || json.Unmarshal(spec.Operations, &ops) != nil {
			return nil, &statusErr{400, "invalid patch"}
		}
	}
	for _, op := range ops {
		name := strings.TrimPrefix(op.Path, "/")
		switch op.Op {
		case "set", "add", "replace":
			old[name] = op.Value
		case "incr":
			n, _ := old[name].(float64)
			old[name] = n + op.Value.(float64)
		case "remove":
			delete(old, name)
		}
	}
	b, _ := json.Marshal(old)
	return f.store(b, "patch")
}

func (f *fakeCollection) DeleteDocument(_ context.Context, link string, _ WriteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, err := f.idOf(link)
	if err != nil {
		return err
	}
	if _, ok := f.docs[id]; !ok {
		return &statusErr{404, "Entity with the specified id does not exist in the system."}
	}
	delete(f.docs, id)
	f.writes = append(f.writes, "delete "+id)
	return nil
}

func (f *fakeCollection) doc(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.docs[id]
}
