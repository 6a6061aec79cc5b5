package script

import (
	"encoding/json"
	"strings"

	"github.com/dop251/goja"
)

// The natives the prelude's API calls. They run on the script's goroutine,
// with v.cur the run in progress.

const outsideCollection = "Function is not allowed to operate on resources outside current collection"

// submit queues one collection operation:
// submit(op, link, payload, options, callback) → accepted.
func (v *vm) submit(call goja.FunctionCall) goja.Value {
	r := v.cur
	r.needCollection(v)
	op := call.Argument(0).String()
	linkVal := call.Argument(1)
	if _, ok := linkVal.(goja.String); !ok {
		v.throwStatus(StatusBadRequest, "The link must be a string.")
	}
	link := linkVal.String()
	switch op {
	case "readFeed", "query", "create", "upsert":
		if !r.isCollectionLink(link) {
			v.throwStatus(StatusBadRequest, outsideCollection)
		}
	default:
		if !r.isDocumentLink(link) {
			v.throwStatus(StatusBadRequest, outsideCollection)
		}
	}
	payload := ""
	if p := call.Argument(2); !goja.IsUndefined(p) {
		payload = p.String()
	}
	opts := optionValues(call.Argument(3))
	cb, _ := goja.AssertFunction(call.Argument(4))
	var params []Param
	if op == "query" && opts.parameters != "" {
		var ps []struct {
			Name  string          `json:"name"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(opts.parameters), &ps); err != nil {
			v.throwStatus(StatusBadRequest, "The query parameters must be an array of {name, value}.")
		}
		for _, p := range ps {
			if p.Value == nil {
				p.Value = json.RawMessage("null")
			}
			params = append(params, Param{Name: p.Name, Value: p.Value})
		}
	}
	if !r.accepting() {
		return v.rt.ToValue(false)
	}
	r.queue = append(r.queue, func() error {
		return r.perform(v, op, link, payload, opts, params, cb)
	})
	return v.rt.ToValue(true)
}

// options are the script options a collection call may carry.
type options struct {
	etag, ifNoneMatch, indexAction, continuation, parameters string
	pageSize                                                 int
}

func optionValues(val goja.Value) options {
	var o options
	obj, ok := val.(*goja.Object)
	if !ok {
		return o
	}
	str := func(name string) string {
		x := obj.Get(name)
		if x == nil || goja.IsUndefined(x) || goja.IsNull(x) {
			return ""
		}
		return x.String()
	}
	o.etag, o.ifNoneMatch, o.indexAction = str("etag"), str("ifNoneMatch"), str("indexAction")
	o.continuation, o.parameters = str("continuation"), str("parameters")
	if ps := obj.Get("pageSize"); ps != nil && !goja.IsUndefined(ps) && !goja.IsNull(ps) {
		o.pageSize = int(ps.ToInteger())
	}
	return o
}

// perform runs one queued operation against the collection and hands the
// outcome to the callback (or throws it when there is none).
func (r *run) perform(v *vm, op, link, payload string, o options, params []Param, cb goja.Callable) error {
	ctx, c := r.ctx, r.coll
	wo := WriteOptions{IfMatch: o.etag, IndexAction: o.indexAction}
	fo := FeedOptions{PageSize: o.pageSize, Continuation: o.continuation}
	if fo.PageSize == 0 {
		fo.PageSize = 100
	}
	var (
		doc  json.RawMessage
		page Page
		err  error
		feed bool
	)
	switch op {
	case "read":
		doc, err = c.ReadDocument(ctx, link, ReadOptions{IfNoneMatch: o.ifNoneMatch})
	case "readFeed":
		page, err = c.ReadDocuments(ctx, fo)
		feed = true
	case "query":
		page, err = c.QueryDocuments(ctx, Query{Text: payload, Parameters: params}, fo)
		feed = true
	case "create":
		doc, err = c.CreateDocument(ctx, json.RawMessage(payload), wo)
	case "upsert":
		doc, err = c.UpsertDocument(ctx, json.RawMessage(payload), wo)
	case "replace":
		doc, err = c.ReplaceDocument(ctx, link, json.RawMessage(payload), wo)
	case "patch":
		doc, err = c.PatchDocument(ctx, link, json.RawMessage(payload), wo)
	case "delete":
		err = c.DeleteDocument(ctx, link, wo)
	default:
		return failure(StatusInternalServerError, "unknown collection operation "+op)
	}

	respOpts := v.rt.NewObject()
	if err != nil {
		status, text := statusOf(err)
		if op == "read" && status == 304 {
			_ = respOpts.Set("notModified", true)
			_ = respOpts.Set("statusCode", 304)
			return r.callback(v, cb, goja.Undefined(), goja.Undefined(), respOpts, false)
		}
		_ = respOpts.Set("statusCode", status)
		errVal, err := v.errorValue(status, text)
		if err != nil {
			return err
		}
		if cb == nil {
			return &thrown{errVal}
		}
		return r.callback(v, cb, errVal, goja.Undefined(), respOpts, op == "delete")
	}

	if cb == nil {
		// Nobody will see the result: spare parsing it into the runtime.
		return nil
	}
	var res goja.Value = goja.Undefined()
	switch {
	case feed:
		_ = respOpts.Set("continuation", page.Continuation)
		if page.Continuation == "" {
			_ = respOpts.Set("continuation", goja.Undefined())
		}
		res, err = v.parseJSON(joinDocuments(page.Documents))
	case doc != nil:
		res, err = v.parseJSON(doc)
	}
	if err != nil {
		return failure(StatusInternalServerError, "The collection returned invalid JSON: "+err.Error())
	}
	status := 200
	if op == "create" {
		status = 201
	} else if op == "delete" {
		status = 204
	}
	_ = respOpts.Set("statusCode", status)
	return r.callback(v, cb, goja.Undefined(), res, respOpts, op == "delete")
}

// callback calls cb(err, resource, options), or cb(err, options) for delete.
func (r *run) callback(v *vm, cb goja.Callable, errVal, res goja.Value, respOpts *goja.Object, noResource bool) error {
	if cb == nil {
		return nil
	}
	var err error
	if noResource {
		_, err = cb(goja.Undefined(), errVal, respOpts)
	} else {
		_, err = cb(goja.Undefined(), errVal, res, respOpts)
	}
	return err
}

func joinDocuments(docs []json.RawMessage) []byte {
	n := 2
	for _, d := range docs {
		n += len(d) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	return append(b, ']')
}

// readAll queues a read of every document of the partition for the query
// API: readAll(callback(err, docs)) → accepted.
func (v *vm) readAll(call goja.FunctionCall) goja.Value {
	r := v.cur
	r.needCollection(v)
	cb, ok := goja.AssertFunction(call.Argument(0))
	if !ok {
		v.throwStatus(StatusInternalServerError, "readAll needs a callback")
	}
	if !r.accepting() {
		return v.rt.ToValue(false)
	}
	r.queue = append(r.queue, func() error {
		var docs []json.RawMessage
		cont := ""
		for {
			page, err := r.coll.ReadDocuments(r.ctx, FeedOptions{PageSize: -1, Continuation: cont})
			if err != nil {
				status, text := statusOf(err)
				errVal, err := v.errorValue(status, text)
				if err != nil {
					return err
				}
				_, cerr := cb(goja.Undefined(), errVal, goja.Undefined())
				return cerr
			}
			docs = append(docs, page.Documents...)
			if page.Continuation == "" {
				break
			}
			if r.overBudget() {
				reason := newTimeoutError(r.limits.Timeout)
				r.stop(v, reason)
				return reason
			}
			cont = page.Continuation
		}
		res, err := v.parseJSON(joinDocuments(docs))
		if err != nil {
			return failure(StatusInternalServerError, "The collection returned invalid JSON: "+err.Error())
		}
		_, err = cb(goja.Undefined(), goja.Undefined(), res)
		return err
	})
	return v.rt.ToValue(true)
}

// trimLink drops the leading and trailing slashes of a link.
func trimLink(s string) string { return strings.Trim(s, "/") }

func (r *run) isCollectionLink(link string) bool {
	l := trimLink(link)
	return l != "" && (l == trimLink(r.coll.SelfLink()) || l == trimLink(r.coll.AltLink()))
}

func (r *run) isDocumentLink(link string) bool {
	l := trimLink(link)
	for _, base := range []string{r.coll.SelfLink(), r.coll.AltLink()} {
		prefix := trimLink(base) + "/docs/"
		if rest, ok := strings.CutPrefix(l, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}

func (r *run) needCollection(v *vm) {
	if r.coll == nil {
		v.throwStatus(StatusBadRequest, "The collection is not available to this script.")
	}
}

func (v *vm) selfLink(goja.FunctionCall) goja.Value {
	v.cur.needCollection(v)
	return v.rt.ToValue(v.cur.coll.SelfLink())
}

func (v *vm) altLink(goja.FunctionCall) goja.Value {
	v.cur.needCollection(v)
	return v.rt.ToValue(v.cur.coll.AltLink())
}

// need checks that the run has what a getContext() accessor hands out.
func (v *vm) need(call goja.FunctionCall) goja.Value {
	r := v.cur
	what := call.Argument(0).String()
	if r.kind == kindUDF {
		name := map[string]string{"context": "getContext", "collection": "__"}[what]
		if name == "" {
			name = what
		}
		panic(v.rt.NewTypeError(name + " is not available in a user-defined function"))
	}
	switch what {
	case "collection":
		r.needCollection(v)
	case "response":
		if !r.resp.exists {
			v.throwStatus(StatusBadRequest, "getResponse is not available in a pre-trigger.")
		}
	case "request":
		if !r.req.exists {
			v.throwStatus(StatusBadRequest, "getRequest is not available in this script.")
		}
	}
	return goja.Undefined()
}

func (v *vm) message(which goja.Value) *message {
	r := v.cur
	if which.String() == "request" {
		if !r.req.exists {
			v.throwStatus(StatusBadRequest, "getRequest is not available in this script.")
		}
		return &r.req
	}
	if !r.resp.exists {
		v.throwStatus(StatusBadRequest, "getResponse is not available in a pre-trigger.")
	}
	return &r.resp
}

func (v *vm) getBody(call goja.FunctionCall) goja.Value {
	m := v.message(call.Argument(0))
	if m.val == nil {
		val, err := v.parseJSON(m.raw)
		if err != nil {
			panic(err)
		}
		m.val = val
	}
	return m.val
}

func (v *vm) setBody(call goja.FunctionCall) goja.Value {
	m := v.message(call.Argument(0))
	m.val, m.set = call.Argument(1), true
	return goja.Undefined()
}

// appendBody concatenates text to the response body, refusing to grow it
// beyond MaxResponseBytes.
func (v *vm) appendBody(call goja.FunctionCall) goja.Value {
	m := v.message(v.rt.ToValue("response"))
	add := v.jsString(call.Argument(0))
	cur := v.jsString(v.rt.ToValue(""))
	if m.val == nil && len(m.raw) > 0 {
		v.getBody(goja.FunctionCall{Arguments: []goja.Value{v.rt.ToValue("response")}})
	}
	if m.val != nil && !goja.IsUndefined(m.val) {
		cur = v.jsString(m.val)
	}
	if cur.Length()+add.Length() > v.cur.limits.MaxResponseBytes {
		v.throwStatus(StatusRequestEntityTooLarge, responseTooLarge)
	}
	m.val, m.set = cur.Concat(add), true
	return goja.Undefined()
}

// jsString converts a value to a JavaScript string (ToString).
func (v *vm) jsString(val goja.Value) goja.String { return toJSString(v.rt, val) }

const responseTooLarge = "Resulting message would be too large because of \"Body\". Return from the script with the current message and continue in another call."

func (v *vm) getValue(call goja.FunctionCall) goja.Value {
	m := v.message(call.Argument(0))
	name := call.Argument(1).String()
	if name == "operationType" && m == &v.cur.req {
		return v.rt.ToValue(v.cur.opType)
	}
	if val, ok := m.props[name]; ok {
		return v.rt.ToValue(val)
	}
	return goja.Undefined()
}

func (v *vm) setValue(call goja.FunctionCall) goja.Value {
	m := v.message(call.Argument(0))
	name := call.Argument(1).String()
	// As in Cosmos DB, a script may change the headers it was given but not
	// add any; a response has none to change (the service documents no
	// response header a script sets; the script log has its own call).
	if _, ok := m.props[name]; !ok {
		v.throwStatus(StatusBadRequest, "Cannot set new values: "+name)
	}
	m.props[name] = call.Argument(2).String()
	return goja.Undefined()
}

func (v *vm) logging(goja.FunctionCall) goja.Value { return v.rt.ToValue(v.cur.logging) }

func (v *vm) log(call goja.FunctionCall) goja.Value {
	r := v.cur
	if r.logging {
		if r.logText.Len()+len(call.Argument(0).String()) > r.limits.MaxResponseBytes {
			v.throwStatus(StatusRequestEntityTooLarge, "The script log would be too large.")
		}
		r.logText.WriteString(call.Argument(0).String())
		r.logText.WriteByte('\n')
	}
	return goja.Undefined()
}

func (v *vm) guid(goja.FunctionCall) goja.Value { return v.rt.ToValue(newGUID()) }

func (v *vm) taint(goja.FunctionCall) goja.Value {
	v.tainted = true
	return goja.Undefined()
}
