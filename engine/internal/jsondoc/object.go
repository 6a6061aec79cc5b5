package jsondoc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strings"
)

// Field is one top-level property of a JSON object, in document order.
type Field struct {
	Name  string
	Value json.RawMessage
}

// Object is a JSON object kept as its properties in order, so that a document
// reads back with its properties where the client put them.
type Object []Field

// ErrNotObject is Parse's error for JSON that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// Parse splits a valid JSON object into its top-level properties. The
// input must already have passed json.Valid. The values alias b.
func Parse(b []byte) (Object, error) {
	// Most objects have a few properties: one allocation.
	return ParseSized(b, 8)
}

// ParseSized is Parse with room for n properties in the object's first
// allocation: a stored record has its item's properties and five system
// properties, past Parse's 8 for most items, and growing the object to
// hold them costs a second allocation and a copy.
func ParseSized(b []byte, n int) (Object, error) {
	return ParseInto(nil, b, n)
}

// ParseInto is ParseSized listing the properties in dst's array when it
// has room for them: the array of a parse whose object is done with.
func ParseInto(dst Object, b []byte, n int) (Object, error) {
	return ParseNamed(dst, b, n, nil)
}

// ParseNamed is ParseInto taking the name of a property whose plain name
// is a system property's, or the name of a property of names (another
// version of the object: the one at the same index first), from there:
// a string already made, not a copy of b's bytes. A write parses the
// version it replaces so, whose names are mostly the new version's and
// the system properties': for most, no string is made.
func ParseNamed(dst Object, b []byte, n int, names Object) (Object, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, ErrNotObject
	}
	i++
	c := collector{obj: dst[:0], n: n, names: names}
	for {
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == '}' {
			return c.done(b), nil
		}
		end, plain := skipName(b, i)
		at := i
		i = SkipSpace(b, end)
		i++ // ':'
		i = SkipSpace(b, i)
		vend := SkipValue(b, i)
		if err := c.add(b, at, end, i, vend, plain); err != nil {
			return nil, err
		}
		i = SkipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// collector lists an object's top-level properties as ParseInto and
// ParseValid return them: the plain names of the first 16 are spans of b
// copied into one string at the end (done), not one string each; later
// plain names are copied one by one and other names decoded.
type collector struct {
	obj Object // in dst's array until it needs a larger one
	n   int    // the room to make when dst has none
	// names, when set, are strings to take plain names from (ParseNamed).
	names Object
	// dropSystem leaves the system properties out (IsSystem).
	dropSystem bool
	// The plain names of the first properties, where they are in b.
	plain     [16]nameSpan
	np, total int
	// made is set once a listed property's name is not one of names'.
	made bool
}

// nameSpan is where a plain property name is in b, and the index of its
// property in the object.
type nameSpan struct{ at, start, end int }

// add lists the property whose name is the string b[i:end] and whose value
// is b[v:vend]; a name json.Unmarshal refuses is its error, the property
// not listed. plain reports that the name's bytes between the quotes are
// its value (isPlainName, or the validator's scan of it).
func (c *collector) add(b []byte, i, end, v, vend int, plain bool) error {
	name, known := "", false
	if plain && c.dropSystem && isSystemBytes(b[i+1:end-1]) {
		return nil
	}
	if plain && c.names != nil {
		name, known = c.known(b[i+1 : end-1])
	}
	switch {
	case known:
	case plain && c.np < len(c.plain):
		c.plain[c.np] = nameSpan{len(c.obj), i + 1, end - 1}
		c.np++
		c.total += end - 1 - (i + 1)
	case plain:
		name = string(b[i+1 : end-1])
	default:
		var err error
		if name, err = unmarshalName(b[i:end]); err != nil {
			return err
		}
		if c.dropSystem && IsSystem(name) {
			return nil
		}
	}
	c.made = c.made || !known
	if cap(c.obj) == 0 {
		c.obj = make(Object, 0, max(c.n, 1))
	}
	c.obj = append(c.obj, Field{Name: name, Value: json.RawMessage(b[v:vend])})
	return nil
}

// known is the string of the plain name nb that ParseNamed takes from
// elsewhere: a system property's, or one of c.names' (the one at the
// property's index first); ok is false when there is none.
func (c *collector) known(nb []byte) (string, bool) {
	if k := len(c.obj); k < len(c.names) && c.names[k].Name == string(nb) {
		return c.names[k].Name, true
	}
	if s, ok := systemName(nb); ok {
		return s, true
	}
	for _, f := range c.names {
		if f.Name == string(nb) {
			return f.Name, true
		}
	}
	return "", false
}

// done copies the plain names into one string and returns the properties,
// nil when there are none.
func (c *collector) done(b []byte) Object {
	obj := c.obj
	if len(obj) == 0 {
		return nil
	}
	if c.np > 0 {
		var sb strings.Builder
		sb.Grow(c.total)
		for _, s := range c.plain[:c.np] {
			sb.Write(b[s.start:s.end])
		}
		all, off := sb.String(), 0
		for _, s := range c.plain[:c.np] {
			obj[s.at].Name = all[off : off+s.end-s.start]
			off += s.end - s.start
		}
	}
	return obj
}

// unmarshalName decodes a property name that is not plain: its own
// variable escapes to json.Unmarshal, not Parse's.
func unmarshalName(b []byte) (string, error) {
	var name string
	err := json.Unmarshal(b, &name)
	return name, err
}

// skipName is SkipString(b, i) and isPlainName of the string it skips, a
// property name, in one scan of it eight bytes at a time: a name is
// plain when the first byte special8 marks (or a 0x7f) is its closing
// quote. Any other name is skipped and looked at again as before.
func skipName(b []byte, i int) (end int, plain bool) {
	const lo = 0x0101010101010101
	if i < len(b) && b[i] == '"' {
		for j := i + 1; j+8 <= len(b); j += 8 {
			x := binary.LittleEndian.Uint64(b[j:])
			d := x ^ (lo * 0x7f)
			t := special8(x) | (d-lo)&^d&(lo*0x80)
			if t == 0 {
				continue
			}
			j += bits.TrailingZeros64(t) >> 3
			if b[j] != '"' {
				break
			}
			return j + 1, true
		}
	}
	end = SkipString(b, i)
	return end, isPlainName(b, i, end)
}

// isPlainName reports whether the property name b[i:end] (end as
// SkipString returns it, which may pass the end of b) is IsPlainString:
// printable ASCII without escapes, which is its bytes between the quotes;
// anything else is decoded by json.Unmarshal.
func isPlainName(b []byte, i, end int) bool {
	return end <= len(b) && IsPlainString(b[i:end])
}

// Get returns the raw value of a property; of a repeated name, the last.
func (o Object) Get(name string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Name == name {
			return o[i].Value, true
		}
	}
	return nil, false
}

// WithoutSystem returns the properties whose names are not system
// properties: o itself, capped to its length, when it has none (what
// clients send, unless they write back what they read), else a copy.
func (o Object) WithoutSystem() Object {
	for i, f := range o {
		if !IsSystem(f.Name) {
			continue
		}
		out := make(Object, i, len(o)-1)
		copy(out, o[:i])
		for _, f := range o[i+1:] {
			if !IsSystem(f.Name) {
				out = append(out, f)
			}
		}
		return out
	}
	return o[:len(o):len(o)]
}

// DropSystem is WithoutSystem in o's own array, for a caller done with o:
// the properties that are not system properties, in their order, capped
// to their number so that an append does not write into o's array.
func (o Object) DropSystem() Object {
	out := o[:0]
	for _, f := range o {
		if !IsSystem(f.Name) {
			out = append(out, f)
		}
	}
	return out[:len(out):len(out)]
}

// Encode writes the object, followed by extra properties.
func (o Object) Encode(extra ...Field) []byte {
	n := o.EncodedLen() + Object(extra).EncodedLen()
	return o.AppendEncode(make([]byte, 0, n+128), extra...)
}

// EncodedLen is about the length of the object's encoding (exact when its
// names need no escapes).
func (o Object) EncodedLen() int {
	n := 2
	for _, f := range o {
		n += len(f.Name) + len(f.Value) + 4
	}
	return n
}

// AppendEncode appends the object's encoding, followed by extra properties,
// to buf.
func (o Object) AppendEncode(buf []byte, extra ...Field) []byte {
	buf = append(buf, '{')
	first := true
	write := func(f Field) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = AppendString(buf, f.Name)
		buf = append(buf, ':')
		buf = append(buf, f.Value...)
	}
	for _, f := range o {
		write(f)
	}
	for _, f := range extra {
		write(f)
	}
	return append(buf, '}')
}

// IsSystem reports whether name is a system property: one the service owns
// on every resource, whose value from a client is ignored.
func IsSystem(name string) bool {
	// Every one begins with '_': most names are settled without the map.
	return len(name) > 1 && name[0] == '_' && systemProperties[name]
}

// isSystemBytes is IsSystem(string(nb)), without making the string.
func isSystemBytes(nb []byte) bool {
	return len(nb) > 1 && nb[0] == '_' && systemProperties[string(nb)]
}

// systemName is the system property named nb, as a string of the
// program's: the names a stored record ends with first.
func systemName(nb []byte) (string, bool) {
	switch string(nb) {
	case "_rid":
		return "_rid", true
	case "_self":
		return "_self", true
	case "_etag":
		return "_etag", true
	case "_attachments":
		return "_attachments", true
	case "_ts":
		return "_ts", true
	case "_lsn":
		return "_lsn", true
	}
	return "", false
}

var systemProperties = map[string]bool{
	"_rid": true, "_self": true, "_etag": true, "_ts": true, "_attachments": true, "_lsn": true,
	"_colls": true, "_users": true, "_docs": true, "_sprocs": true, "_triggers": true,
	"_udfs": true, "_conflicts": true,
}

// NextName is NextField without the value's skipping: v is the index of
// the value's first byte, for a caller that reads the value itself (and
// goes on at the index past it and its comma, as NextField's next is).
func NextName(b []byte, i int) (name []byte, v int, ok bool, err error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] == '}' {
		return nil, i, false, nil
	}
	end, plain := skipName(b, i)
	if plain {
		name = b[i+1 : end-1]
	} else {
		s, err := unmarshalName(b[i:end])
		if err != nil {
			return nil, i, false, err
		}
		name = []byte(s)
	}
	i = SkipSpace(b, end)
	i++ // ':'
	return name, SkipSpace(b, i), true, nil
}

// NextField reads one property of the valid JSON object b without
// building an Object: i is the index just past the object's '{' (or the
// next NextField returned), and the property is the one Parse would list
// there, its name the same bytes (b's own between the quotes when plain,
// else decoded). ok is false past the last property.
func NextField(b []byte, i int) (name []byte, value json.RawMessage, next int, ok bool, err error) {
	name, i, ok, err = NextName(b, i)
	if !ok || err != nil {
		return nil, nil, i, false, err
	}
	vend := SkipValue(b, i)
	value = b[i:vend]
	i = SkipSpace(b, vend)
	if i < len(b) && b[i] == ',' {
		i++
	}
	return name, value, i, true, nil
}
