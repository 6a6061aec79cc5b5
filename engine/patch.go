package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/query"
)

// MaxPatchOperations is the most operations one patch may carry.
const MaxPatchOperations = 10

// The patch operations.
const (
	PatchAdd       = "add"
	PatchSet       = "set"
	PatchReplace   = "replace"
	PatchRemove    = "remove"
	PatchIncrement = "incr"
	PatchMove      = "move"
)

// PatchOperation is one operation of a patch: Op on the JSON pointer Path,
// with Value (add, set, replace, incr) or From (move).
type PatchOperation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	// segs and from are Path and From split into their segments, by
	// ParsePatch's validation; applyPatch splits them when they are not.
	segs, from []string
}

// Patch is a validated patch request: its operations and the filter
// predicate ("FROM c WHERE ...") the current item must satisfy, if any.
type Patch struct {
	Condition  *query.Condition
	Operations []PatchOperation
}

// ParsePatch parses and validates a patch body: {"condition"?, "operations":
// [...]}, or a bare array of operations. Errors are 400s.
func ParsePatch(body []byte) (*Patch, error) {
	body = bytes.TrimSpace(body)
	valid, perr := validPayload(body)
	if len(body) == 0 || !valid {
		return nil, BadRequest("The patch request body is not valid JSON.")
	}
	if perr != nil {
		return nil, perr
	}
	condition, operations, ok := readPatchBody(body)
	if !ok {
		var err error
		if condition, operations, err = unmarshalPatchBody(body); err != nil {
			return nil, BadRequest("The patch request body is invalid: it must be {\"operations\":[{\"op\":...,\"path\":...}, ...]} (%v).", err)
		}
	}
	p := &Patch{Operations: operations}
	if len(p.Operations) == 0 {
		return nil, BadRequest("The patch request has no operations: send between 1 and %d.", MaxPatchOperations)
	}
	if len(p.Operations) > MaxPatchOperations {
		return nil, BadRequest("The number of patch operations can't exceed %d: this request has %d.", MaxPatchOperations, len(p.Operations))
	}
	for i := range p.Operations {
		if e := validateOperation(i+1, &p.Operations[i]); e != nil {
			return nil, e
		}
	}
	if condition != nil && strings.TrimSpace(*condition) != "" {
		cond, err := query.ParseCondition(*condition)
		if err != nil {
			return nil, BadRequest("The patch condition %q is invalid: %v", *condition, err)
		}
		p.Condition = cond
	}
	return p, nil
}

// unmarshalPatchBody reads a patch body, valid JSON, with encoding/json:
// its keys in any case, unknown keys ignored, its errors for values of
// another type.
func unmarshalPatchBody(body []byte) (*string, []PatchOperation, error) {
	var wire struct {
		Condition  *string          `json:"condition"`
		Operations []PatchOperation `json:"operations"`
	}
	var err error
	if body[0] == '[' {
		err = json.Unmarshal(body, &wire.Operations)
	} else {
		err = json.Unmarshal(body, &wire)
	}
	return wire.Condition, wire.Operations, err
}

// readPatchBody reads a patch body, valid JSON, as unmarshalPatchBody
// does, without reflection, when it has the shape the SDKs send: a bare
// array of operations, or an object of the keys condition (a string or
// null) and operations (an array or null), each operation an object of
// the keys op, path, from (strings) and value, each key once and as
// written here. ok is false for any other body, which
// unmarshalPatchBody reads. A value is a part of body.
func readPatchBody(body []byte) (condition *string, ops []PatchOperation, ok bool) {
	if body[0] == '[' {
		ops, _, ok = readPatchOperations(body)
		return nil, ops, ok
	}
	if body[0] != '{' {
		return nil, nil, false
	}
	var seen [2]bool
	for i := 1; ; {
		name, v, more, err := jsondoc.NextName(body, i)
		if err != nil {
			return nil, nil, false
		}
		if !more {
			return condition, ops, true
		}
		var k int
		switch string(name) {
		case "condition":
			k = 0
		case "operations":
			k = 1
		default:
			return nil, nil, false
		}
		if seen[k] {
			return nil, nil, false
		}
		seen[k] = true
		// The operations are read where they stand, not skipped first.
		var end int
		if k == 1 && body[v] == '[' {
			if ops, end, ok = readPatchOperations(body[v:]); !ok {
				return nil, nil, false
			}
			end += v
		} else {
			end = jsondoc.SkipValue(body, v)
			value := body[v:end]
			switch {
			case string(value) == "null":
			case k == 0:
				s, ok := readPatchString(value)
				if !ok {
					return nil, nil, false
				}
				condition = &s
			default:
				return nil, nil, false // operations neither an array nor null
			}
		}
		if i = jsondoc.SkipSpace(body, end); i < len(body) && body[i] == ',' {
			i++
		}
	}
}

// readPatchOperations reads an array of operations for readPatchBody:
// up to MaxPatchOperations in one pass, into an array on the stack copied
// into a slice of their number; more (a request ParsePatch refuses by
// their count) by readManyPatchOperations, which counts them first. The
// answer is readManyPatchOperations's either way: the same operations,
// and not ok for the same arrays.
func readPatchOperations(b []byte) (ops []PatchOperation, end int, ok bool) {
	if b[0] != '[' {
		return nil, 0, false
	}
	var room [MaxPatchOperations]PatchOperation
	n := 0
	i := jsondoc.SkipSpace(b, 1)
	for ; b[i] != ']'; n++ {
		if n == len(room) {
			ops, ok := readManyPatchOperations(b)
			return ops, jsondoc.SkipValue(b, 0), ok
		}
		end := jsondoc.SkipValue(b, i)
		if !readPatchOperation(&room[n], b[i:end]) {
			return nil, 0, false
		}
		if i = jsondoc.SkipSpace(b, end); b[i] == ',' {
			i = jsondoc.SkipSpace(b, i+1)
		}
	}
	ops = make([]PatchOperation, n)
	copy(ops, room[:n])
	return ops, i + 1, true
}

// readManyPatchOperations reads an array of operations for
// readPatchOperations: counted, then read into a slice of their number.
func readManyPatchOperations(b []byte) ([]PatchOperation, bool) {
	if b[0] != '[' {
		return nil, false
	}
	n := 0
	for i := jsondoc.SkipSpace(b, 1); b[i] != ']'; n++ {
		if i = jsondoc.SkipSpace(b, jsondoc.SkipValue(b, i)); b[i] == ',' {
			i = jsondoc.SkipSpace(b, i+1)
		}
	}
	ops := make([]PatchOperation, n)
	i := jsondoc.SkipSpace(b, 1)
	for k := range ops {
		end := jsondoc.SkipValue(b, i)
		if !readPatchOperation(&ops[k], b[i:end]) {
			return nil, false
		}
		if i = jsondoc.SkipSpace(b, end); b[i] == ',' {
			i = jsondoc.SkipSpace(b, i+1)
		}
	}
	return ops, true
}

// readPatchOperation reads one operation for readPatchBody.
func readPatchOperation(op *PatchOperation, b []byte) bool {
	if b[0] != '{' {
		return false
	}
	var seen [4]bool
	for i := 1; ; {
		name, value, next, more, err := jsondoc.NextField(b, i)
		if err != nil {
			return false
		}
		if !more {
			return true
		}
		i = next
		var k int
		var dst *string
		switch string(name) {
		case "op":
			k, dst = 0, &op.Op
		case "path":
			k, dst = 1, &op.Path
		case "from":
			k, dst = 2, &op.From
		case "value":
			k = 3
		default:
			return false
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		if dst == nil {
			op.Value = json.RawMessage(value)
			continue
		}
		s, ok := readPatchString(value)
		if !ok {
			return false
		}
		*dst = s
	}
}

// readPatchString reads a JSON string for readPatchBody: one without
// escapes of valid UTF-8 is its bytes, another is what json.Unmarshal
// makes of it; ok is false for a value that is not a string.
func readPatchString(v []byte) (string, bool) {
	if v[0] != '"' {
		return "", false
	}
	if s, ok := jsondoc.PlainString(v); ok && utf8.ValidString(s) {
		return s, true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

func validateOperation(n int, op *PatchOperation) *Error {
	op.Op = strings.ToLower(op.Op)
	switch op.Op {
	case PatchAdd, PatchSet, PatchReplace, PatchRemove, PatchIncrement, PatchMove:
	default:
		return BadRequest("For Operation(%d): %q is not a patch operation: use add, set, replace, remove, incr or move.", n, op.Op)
	}
	segs, err := parsePointer(op.Path)
	if err != nil {
		return BadRequest("For Operation(%d): the path %q is invalid: %v.", n, op.Path, err)
	}
	op.segs = segs
	switch op.Op {
	case PatchAdd, PatchSet, PatchReplace, PatchIncrement:
		if op.Value == nil {
			return BadRequest("For Operation(%d): %s needs a value.", n, op.Op)
		}
	case PatchMove:
		if op.From == "" {
			return BadRequest("For Operation(%d): move needs a from path.", n)
		}
		from, err := parsePointer(op.From)
		if err != nil {
			return BadRequest("For Operation(%d): the from path %q is invalid: %v.", n, op.From, err)
		}
		op.from = from
		if strings.HasPrefix(op.Path, op.From+"/") {
			return BadRequest("For Operation(%d): cannot move %s into its own child %s.", n, op.From, op.Path)
		}
	}
	if op.Op == PatchIncrement && !isJSONNumber(op.Value) {
		return BadRequest("For Operation(%d): incr needs a number, not %s.", n, op.Value)
	}
	return nil
}

// isJSONNumber reports whether the valid JSON value v is a number a
// float64 holds, as json.Unmarshal into one reads it; null, which
// json.Unmarshal leaves the float as it is, is no number.
func isJSONNumber(v []byte) bool {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	_, err := strconv.ParseFloat(string(v), 64)
	return err == nil
}

// parsePointer splits a JSON pointer into its unescaped segments.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New("a patch path is a JSON pointer starting with /")
	}
	if p == "/" {
		return nil, errors.New("a patch path must name a property")
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if strings.Contains(s, "~") {
			var b strings.Builder
			for j := 0; j < len(s); j++ {
				if s[j] != '~' {
					b.WriteByte(s[j])
					continue
				}
				if j+1 < len(s) && s[j+1] == '0' {
					b.WriteByte('~')
				} else if j+1 < len(s) && s[j+1] == '1' {
					b.WriteByte('/')
				} else {
					return nil, errors.New("~ must be followed by 0 or 1")
				}
				j++
			}
			s = b.String()
		}
		segs[i] = s
	}
	return segs, nil
}

// protectedPath explains why an operation may not touch segs: the id, a
// system property, or the partition key (or an object holding it).
func protectedPath(n int, path string, segs []string, pk *PartitionKeyDefinition) *Error {
	if len(segs) == 1 && segs[0] == "id" {
		return BadRequest("For Operation(%d): the id cannot be patched (path %s): create a new item and delete the old one.", n, path)
	}
	if jsondoc.IsSystem(segs[0]) {
		return BadRequest("For Operation(%d): the system property %s cannot be patched.", n, segs[0])
	}
	for _, kp := range pk.Paths {
		if keyPathStartsWith(kp, segs) {
			return BadRequest("For Operation(%d): the path %s would change the partition key %s, and an item's partition key cannot change: create a new item and delete the old one.", n, path, kp)
		}
	}
	return nil
}

// keyPathStartsWith reports whether segs are the first segments of the
// partition key path kp ("/a/b" has the segments a and b): kp split at
// each '/', without a slice of its segments.
func keyPathStartsWith(kp string, segs []string) bool {
	rest := strings.TrimPrefix(kp, "/")
	for i, s := range segs {
		seg, after, more := strings.Cut(rest, "/")
		if seg != s {
			return false
		}
		if !more {
			return i == len(segs)-1
		}
		rest = after
	}
	return true
}

// applyPatch applies the operations in order to doc and returns the new
// document. It is pure: doc is not changed, and on an error nothing is
// returned. Errors are 400s naming the failing operation.
func applyPatch(doc []byte, ops []PatchOperation, pk *PartitionKeyDefinition) ([]byte, *Error) {
	// The stored item decoded only along the operations' paths: the rest
	// is written back as it is stored.
	root, err := jsondoc.DecodeLazy(doc)
	if err != nil {
		return nil, BadRequest("The stored item is not valid JSON: %v", err)
	}
	if _, ok := root.(*jsondoc.Members); !ok {
		return nil, BadRequest("The stored item is not a JSON object.")
	}
	for i := range ops {
		n := i + 1
		op := &ops[i]
		segs := op.segs
		if segs == nil {
			var perr error
			if segs, perr = parsePointer(op.Path); perr != nil {
				return nil, BadRequest("For Operation(%d): the path %q is invalid: %v.", n, op.Path, perr)
			}
		}
		if e := protectedPath(n, op.Path, segs, pk); e != nil {
			return nil, e
		}
		var value any
		if op.Op == PatchMove {
			from := op.from
			if from == nil {
				var ferr error
				if from, ferr = parsePointer(op.From); ferr != nil {
					return nil, BadRequest("For Operation(%d): the from path %q is invalid: %v.", n, op.From, ferr)
				}
			}
			if e := protectedPath(n, op.From, from, pk); e != nil {
				return nil, e
			}
			if op.From == op.Path {
				if _, e := (&patcher{n: n, op: PatchMove, path: op.From}).get(root, from); e != nil {
					return nil, e
				}
				continue
			}
			v, e := (&patcher{n: n, op: PatchMove, path: op.From}).take(root, from)
			if e != nil {
				return nil, e
			}
			value = v
		} else if op.Value != nil {
			v, verr := jsondoc.Decode(op.Value)
			if verr != nil {
				return nil, BadRequest("For Operation(%d): the value is not valid JSON.", n)
			}
			value = v
		}
		pt := &patcher{n: n, op: op.Op, path: op.Path}
		if e := pt.apply(root, segs, value); e != nil {
			return nil, e
		}
	}
	// Written into a buffer with room for the stored item and the values
	// the operations bring, not grown from nothing.
	size := len(doc) + 64
	for i := range ops {
		size += len(ops[i].Value)
	}
	return jsondoc.AppendValue(make([]byte, 0, size), root), nil
}

// patcher applies one operation.
type patcher struct {
	n    int
	op   string
	path string
}

func kindOf(v any) string {
	if r, ok := v.(*jsondoc.Raw); ok {
		v, _ = jsondoc.Expand(r)
	}
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// parent walks to the container holding the last segment.
func (p *patcher) parent(root any, segs []string) (any, *Error) {
	cur := root
	for i, s := range segs[:len(segs)-1] {
		at := "/" + strings.Join(segs[:i+1], "/")
		switch c := cur.(type) {
		case *jsondoc.Members:
			j := c.Index(s)
			if j < 0 {
				return nil, BadRequest("For Operation(%d): Node(%s) is absent: %s can only change a child of an existing object or array, it cannot create path %s recursively.", p.n, at, p.op, p.path)
			}
			v, e := expand(c.Values[j])
			if e != nil {
				return nil, e
			}
			c.Values[j], cur = v, v
		case []any:
			j, e := p.index(s, len(c), false)
			if e != nil {
				return nil, e
			}
			v, e := expand(c[j])
			if e != nil {
				return nil, e
			}
			c[j], cur = v, v
		default:
			return nil, p.notContainer(segs[:i], cur)
		}
	}
	return cur, nil
}

// expand decodes a value of the stored item that a path goes into (see
// jsondoc.Raw); the stored item is valid JSON, so it fails only on a store
// that is not.
func expand(v any) (any, *Error) {
	x, err := jsondoc.Expand(v)
	if err != nil {
		return nil, BadRequest("The stored item is not valid JSON: %v", err)
	}
	return x, nil
}

func (p *patcher) notContainer(segs []string, v any) *Error {
	return BadRequest("For Operation(%d): Node(/%s) is a %s, not an object or array, so path %s cannot go into it.", p.n, strings.Join(segs, "/"), kindOf(v), p.path)
}

// index parses an array index; "-" (when allowed) and len mean the end.
func (p *patcher) index(s string, n int, end bool) (int, *Error) {
	if s == "-" && end {
		return n, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return 0, BadRequest("For Operation(%d): %q in path %s is not an array index.", p.n, s, p.path)
	}
	if i > n || (i == n && !end) {
		return 0, BadRequest("For Operation(%d): index %d in path %s is out of bounds: the array has %d elements.", p.n, i, p.path, n)
	}
	return i, nil
}

// get returns the value at segs, which must exist.
func (p *patcher) get(root any, segs []string) (any, *Error) {
	par, e := p.parent(root, segs)
	if e != nil {
		return nil, e
	}
	last := segs[len(segs)-1]
	switch c := par.(type) {
	case *jsondoc.Members:
		if j := c.Index(last); j >= 0 {
			return c.Values[j], nil
		}
		return nil, p.absent()
	case []any:
		j, e := p.index(last, len(c), false)
		if e != nil {
			return nil, p.absent()
		}
		return c[j], nil
	}
	return nil, p.notContainer(segs[:len(segs)-1], par)
}

func (p *patcher) absent() *Error {
	verb := map[string]string{PatchReplace: "replaced", PatchRemove: "removed", PatchMove: "moved"}[p.op]
	return BadRequest("For Operation(%d): Node(%s) to be %s is absent.", p.n, p.path, verb)
}

// take removes and returns the value at segs, which must exist.
func (p *patcher) take(root any, segs []string) (any, *Error) {
	v, e := p.get(root, segs)
	if e != nil {
		return nil, e
	}
	if e := p.remove(root, segs); e != nil {
		return nil, e
	}
	return v, nil
}

func (p *patcher) remove(root any, segs []string) *Error {
	par, e := p.parent(root, segs)
	if e != nil {
		return e
	}
	last := segs[len(segs)-1]
	switch c := par.(type) {
	case *jsondoc.Members:
		j := c.Index(last)
		if j < 0 {
			return p.absent()
		}
		c.Remove(j)
		return nil
	case []any:
		j, e := p.index(last, len(c), false)
		if e != nil {
			return p.absent()
		}
		p.setArray(root, segs[:len(segs)-1], append(c[:j:j], c[j+1:]...))
		return nil
	}
	return p.notContainer(segs[:len(segs)-1], par)
}

// setArray stores a grown or shrunk array back under its parent.
func (p *patcher) setArray(root any, segs []string, a []any) {
	par, _ := p.parent(root, segs)
	switch c := par.(type) {
	case *jsondoc.Members:
		c.Set(segs[len(segs)-1], a)
	case []any:
		j, _ := strconv.Atoi(segs[len(segs)-1])
		c[j] = a
	}
}

// apply runs add, set, replace, remove, incr, or the add half of move.
func (p *patcher) apply(root any, segs []string, value any) *Error {
	if p.op == PatchRemove {
		return p.remove(root, segs)
	}
	par, e := p.parent(root, segs)
	if e != nil {
		return e
	}
	last := segs[len(segs)-1]
	switch c := par.(type) {
	case *jsondoc.Members:
		j := c.Index(last)
		switch p.op {
		case PatchAdd, PatchSet, PatchMove:
			c.Set(last, value)
		case PatchReplace:
			if j < 0 {
				return p.absent()
			}
			c.Values[j] = value
		case PatchIncrement:
			if j < 0 {
				c.Set(last, value)
				return nil
			}
			sum, e := p.add(c.Values[j], value)
			if e != nil {
				return e
			}
			c.Values[j] = sum
		}
		return nil
	case []any:
		switch p.op {
		case PatchAdd, PatchMove:
			j, e := p.index(last, len(c), true)
			if e != nil {
				return e
			}
			grown := make([]any, 0, len(c)+1)
			grown = append(append(append(grown, c[:j]...), value), c[j:]...)
			p.setArray(root, segs[:len(segs)-1], grown)
		case PatchSet:
			j, e := p.index(last, len(c), true)
			if e != nil {
				return e
			}
			if j == len(c) {
				p.setArray(root, segs[:len(segs)-1], append(c, value))
			} else {
				c[j] = value
			}
		case PatchReplace:
			j, e := p.index(last, len(c), false)
			if e != nil {
				return p.absent()
			}
			c[j] = value
		case PatchIncrement:
			j, e := p.index(last, len(c), false)
			if e != nil {
				return e
			}
			sum, e := p.add(c[j], value)
			if e != nil {
				return e
			}
			c[j] = sum
		}
		return nil
	}
	return p.notContainer(segs[:len(segs)-1], par)
}

// add increments a number: integers stay integers, anything else is a
// float.
func (p *patcher) add(cur, by any) (any, *Error) {
	cur, e := expand(cur)
	if e != nil {
		return nil, e
	}
	a, ok := cur.(json.Number)
	if !ok {
		return nil, BadRequest("For Operation(%d): Node(%s) is a %s: incr can only add to a number.", p.n, p.path, kindOf(cur))
	}
	b := by.(json.Number)
	if x, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		if y, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			if s := x + y; (s > x) == (y > 0) {
				return json.Number(strconv.FormatInt(s, 10)), nil
			}
			// Two 64-bit integers whose sum is not one: as a double the
			// sum would silently lose its last digits.
			return nil, BadRequest("For Operation(%d): incrementing Node(%s) by %s overflows: the sum of %s and %s is outside the range of a 64-bit integer.", p.n, p.path, b, a, b)
		}
	}
	x, err1 := strconv.ParseFloat(string(a), 64)
	y, err2 := strconv.ParseFloat(string(b), 64)
	s := x + y
	if err1 != nil || err2 != nil || math.IsInf(s, 0) || math.IsNaN(s) {
		return nil, BadRequest("For Operation(%d): incrementing Node(%s) by %s overflows.", p.n, p.path, b)
	}
	out, _ := json.Marshal(s)
	return json.Number(out), nil
}
