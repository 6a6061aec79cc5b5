package jsondoc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of arrays and objects a payload
// may have: encoding/json's limit, which json.Valid enforces.
const maxDepth = 10000

// Validate is json.Valid and Check in one scan of b: valid reports whether
// b is one JSON value (json.Valid's answer, nesting limit included), and,
// when it is, err is Check's refusal, or nil. The write paths called both,
// each a full scan of every body.
func Validate(b []byte) (valid bool, err error) {
	p := validator{b: b}
	i := p.value(p.space(0), 0)
	if i < 0 || p.space(i) != len(b) {
		return false, nil
	}
	return true, p.err
}

// Valid is json.Valid (its answer, nesting limit included) by the
// validator's scan, without Check's refusals: a patch's stored item, a
// patch operation's value. json.Valid's scanner, a call of a state
// function per byte, cost a patch ~15,000 instructions on a stored item
// of ~300 bytes, the most of any one function of the write.
func Valid(b []byte) bool {
	// p.err set from the start: the validator checks what Check refuses
	// only while it has no refusal, and validity does not depend on it.
	p := validator{b: b, err: errNoCheck}
	i := p.value(p.space(0), 0)
	return i >= 0 && p.space(i) == len(b)
}

// errNoCheck is Valid's stand-in refusal, never returned.
var errNoCheck = errors.New("jsondoc: not checked")

// Scan is what ParseValid read of a body besides its properties.
type Scan struct {
	// Valid is json.Valid's answer.
	Valid bool
	// UTF8 is utf8.Valid's, when Valid: a valid JSON text has bytes
	// outside ASCII in its strings only, where the scan decodes them.
	UTF8 bool
	// Object reports that the body is an object (when Valid), whose
	// top-level properties ParseValid returned.
	Object bool
	// Err is Check's refusal, when Valid.
	Err error
	// NewNames reports that a property's name was made from the body's
	// bytes, not taken from the names the parse was given.
	NewNames bool
}

// ParseValid is Validate, utf8.Valid and ParseInto in one scan of b: the
// write path's three scans of every item body, each of all its bytes. The
// object (nil unless s.Valid and s.Object) lists b's top-level properties
// in dst's array when it has room, as ParseInto(dst, b, n) lists them: the
// same names and the same value bytes.
func ParseValid(dst Object, b []byte, n int) (Object, Scan) {
	return parseValid(dst, b, n, false, nil)
}

// ParseValidWithoutSystem is ParseValid followed by Object.DropSystem: the
// system properties' names (a client writing back what it read, a patched
// stored record) are not listed, so that they take no room in dst's array
// (an item's properties and the five system ones do not fit in an item's
// eight). The answer is DropSystem's of ParseValid's.
//
// names, when not nil, are as ParseNamed's: a property whose plain name is
// the name of one of them takes that string, not a copy of b's bytes (a
// write passes the names of the container's last item, which most of the
// next one's are).
func ParseValidWithoutSystem(dst Object, b []byte, n int, names Object) (Object, Scan) {
	obj, s := parseValid(dst, b, n, true, names)
	if obj == nil {
		return nil, s
	}
	return obj[:len(obj):len(obj)], s
}

// parseValid is ParseValid, its system properties left out with
// dropSystem, its names taken from names where they are the same.
func parseValid(dst Object, b []byte, n int, dropSystem bool, names Object) (Object, Scan) {
	p := validator{b: b, collect: true, utf8: true, c: collector{obj: dst[:0], n: n, dropSystem: dropSystem, names: names}}
	i := p.space(0)
	p.isObject = i < len(b) && b[i] == '{'
	i = p.value(i, 0)
	if i < 0 || p.space(i) != len(b) {
		return nil, Scan{}
	}
	s := Scan{Valid: true, UTF8: p.utf8, Object: p.isObject, Err: p.err, NewNames: p.c.made}
	if !p.isObject || p.nameErr != nil {
		// A name json.Unmarshal refuses (invalid UTF-8 in it): ParseInto's
		// error, which a caller reports as not an object.
		s.Object = false
		return nil, s
	}
	return p.c.done(b), s
}

// validator checks a payload's syntax as encoding/json's scanner does and,
// on the way, what Check refuses; err keeps the first such refusal,
// the scan going on so that a body also invalid is reported as invalid.
// With collect, it lists the top-level object's properties (ParseValid),
// and utf8 is false once a string holds bytes that are not UTF-8.
type validator struct {
	b   []byte
	err error

	collect, utf8, isObject bool
	// escaped and high report that the last string str scanned holds an
	// escape, or a byte outside ASCII.
	escaped, high bool
	c             collector // the top-level properties
	nameErr       error     // the first name c refused
	// lazy, when lazy.o is set, is given the top-level object's members
	// as the scan passes them (DecodeLazy). It is a part of the validator,
	// not a pointer to one beside it, which would move it to the heap.
	lazy lazyBuild
}

func (p *validator) space(i int) int {
	b := p.b
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value scans the value at b[i] and returns the index just past it, or -1
// when it is not valid JSON.
func (p *validator) value(i, depth int) int {
	b := p.b
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '{':
		return p.object(i, depth+1)
	case c == '[':
		if depth+1 > maxDepth {
			return -1
		}
		i = p.space(i + 1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = p.value(i, depth+1); i < 0 {
				return -1
			}
			i = p.space(i)
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case ']':
				return i + 1
			case ',':
				i = p.space(i + 1)
			default:
				return -1
			}
		}
	case c == '"':
		return p.str(i)
	case c == 't':
		return p.literal(i, "true")
	case c == 'f':
		return p.literal(i, "false")
	case c == 'n':
		return p.literal(i, "null")
	case c == '-' || '0' <= c && c <= '9':
		end := NumberEnd(b, i)
		if end > 0 && p.err == nil {
			p.err = checkNumber(b[i:end])
		}
		return end
	}
	return -1
}

func (p *validator) literal(i int, lit string) int {
	if len(p.b)-i < len(lit) || string(p.b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// NumberEnd scans the JSON number at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, the index past it, or -1
// when none begins there. b[i:NumberEnd(b, i)] is the longest such prefix;
// b is exactly a number of JSON's grammar when NumberEnd(b, 0) == len(b).
func NumberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return -1
		}
	}
	return i
}

// str scans the string at b[i] == '"': no control characters, escapes
// only \" \\ \/ \b \f \n \r \t and \uXXXX. Eight bytes at a time while none
// of them is a quote, a backslash, a control character or outside ASCII:
// most of a document's bytes are such text.
func (p *validator) str(i int) int {
	b := p.b
	p.escaped, p.high = false, false
	for i++; ; i++ {
		if i+8 <= len(b) {
			t := special8(binary.LittleEndian.Uint64(b[i:]))
			if t == 0 {
				i += 7
				continue
			}
			i += bits.TrailingZeros64(t) >> 3 // the first byte that may need attention
		}
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c >= utf8.RuneSelf:
			p.high = true
			if p.collect {
				if r, size := utf8.DecodeRune(b[i:]); r != utf8.RuneError || size > 1 {
					i += size - 1
				} else {
					p.utf8 = false
				}
			}
		case c == '\\':
			p.escaped = true
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
}

// special8 marks (its byte's high bit) each of the eight bytes of x,
// little-endian, that may need str's attention: a quote, a backslash, a
// control character or one outside ASCII. The first marked byte is the
// first such byte: the tests of a zero byte and of a byte below 0x20 are
// exact up to the first byte they find (a borrow may mark bytes past it).
func special8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(lo*'"'), x^(lo*'\\')
	return (x | (x-lo*0x20)&^x | (q-lo)&^q | (bs-lo)&^bs) & hi
}

// object scans the object at b[i] == '{', refusing (p.err) a property
// named twice.
func (p *validator) object(i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	b := p.b
	var first [16][]byte // the names of most objects, without an allocation
	names := first[:0]
	var seen map[string]struct{}
	i = p.space(i + 1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		end := p.str(i)
		if end < 0 {
			return -1
		}
		// The name's bytes between the quotes are its value when it has
		// no escape and is ASCII (a byte 0x7f too, which ParseInto
		// decodes to itself).
		escaped, plain := p.escaped, !p.escaped && !p.high
		if p.err == nil {
			name := b[i+1 : end-1]
			if escaped {
				var s string
				if json.Unmarshal(b[i:end], &s) != nil {
					return -1
				}
				name = []byte(s)
			}
			dup := false
			if seen != nil {
				_, dup = seen[string(name)]
				seen[string(name)] = struct{}{}
			} else {
				for _, n := range names {
					if bytes.Equal(n, name) {
						dup = true
						break
					}
				}
				names = append(names, name)
				if len(names) > 16 {
					seen = make(map[string]struct{}, 2*len(names))
					for _, n := range names {
						seen[string(n)] = struct{}{}
					}
				}
			}
			if dup {
				p.err = checkError("the property name %q appears more than once in one object.", name)
			}
		}
		nameAt := i
		i = p.space(end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		v := p.space(i + 1)
		if i = p.value(v, depth); i < 0 {
			return -1
		}
		if depth == 1 && p.lazy.o != nil {
			p.lazy.add(b, nameAt, end, v, i, plain)
		}
		if depth == 1 && p.collect {
			if err := p.c.add(b, nameAt, end, v, i, plain); err != nil && p.nameErr == nil {
				p.nameErr = err
			}
		}
		i = p.space(i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '}':
			return i + 1
		case ',':
			i = p.space(i + 1)
		default:
			return -1
		}
	}
}
