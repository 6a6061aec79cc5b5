package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// checkPayload refuses the JSON that parsers read differently, so that no
// client can read back a document whose meaning depends on its parser: a
// number beyond the range of a double (1e400: Infinity in JavaScript, an
// error in Go's and .NET's decoders, a big integer in Python) and an object
// naming a property twice ({"id":"a","id":"b"}: the first value for some
// decoders, the last for others). b must already have passed json.Valid,
// which also bounds its nesting.
func checkPayload(b []byte) *Error {
	_, err := checkValue(b, skipSpace(b, 0))
	return err
}

func payloadError(format string, args ...any) *Error {
	return BadRequest("The request payload is invalid: "+format+" Ensure to provide a valid request payload.", args...)
}

// checkValue checks the value at b[i] and returns the index just past it.
func checkValue(b []byte, i int) (int, *Error) {
	switch b[i] {
	case '{':
		return checkObject(b, i)
	case '[':
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := checkValue(b, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(b, end)
			if b[i] == ']' {
				return i + 1, nil
			}
			i = skipSpace(b, i+1) // ','
		}
	case '"':
		return skipString(b, i), nil
	case 't', 'n':
		return i + 4, nil
	case 'f':
		return i + 5, nil
	default:
		end := i
		for end < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[end])) {
			end++
		}
		if err := checkNumber(b[i:end]); err != nil {
			return 0, err
		}
		return end, nil
	}
}

// checkNumber refuses a number that overflows a double. Fifteen digits or
// fewer without an exponent always fit; a number that underflows reads as
// zero or a subnormal everywhere and is kept as sent.
func checkNumber(n []byte) *Error {
	if len(n) <= 16 && bytes.IndexAny(n, "eE") < 0 {
		return nil
	}
	if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
		shown := string(n)
		if len(shown) > 24 {
			shown = shown[:20] + "..." + " (" + strconv.Itoa(len(n)) + " characters)"
		}
		return payloadError("the number %s is outside the range of a double-precision number (about ±1.8e308).", shown)
	}
	return nil
}

// checkObject checks the object at b[i] and returns the index just past it.
func checkObject(b []byte, i int) (int, *Error) {
	var first [16][]byte // the names of most objects, without an allocation
	names := first[:0]
	var seen map[string]struct{}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return i + 1, nil
	}
	for {
		end := skipString(b, i)
		name := b[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return 0, payloadError("a property name is not a valid JSON string.")
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
			return 0, payloadError("the property name %q appears more than once in one object.", name)
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // ':'
		vend, err := checkValue(b, i)
		if err != nil {
			return 0, err
		}
		i = skipSpace(b, vend)
		if b[i] == '}' {
			return i + 1, nil
		}
		i = skipSpace(b, i+1) // ','
	}
}

// CheckPayload is checkPayload for a body the server decodes itself (a
// query's parameters): nil, or a 400 in the service's format. b must be
// valid JSON, as a body encoding/json has decoded without an error is (it
// checks the whole input first): the caller's decoding has already scanned
// it, and this does not scan it a third time.
func CheckPayload(b []byte) error {
	if err := checkPayload(b); err != nil {
		return err
	}
	return nil
}

// maxPayloadDepth is the deepest nesting of arrays and objects a payload
// may have: encoding/json's limit, which json.Valid enforces.
const maxPayloadDepth = 10000

// validPayload is json.Valid and checkPayload in one scan of b: valid
// reports whether b is one JSON value (json.Valid's answer, nesting limit
// included), and, when it is, perr is checkPayload's. The write paths
// called both, each a full scan of every body.
func validPayload(b []byte) (valid bool, perr *Error) {
	p := payloadScan{b: b}
	i := p.value(p.space(0), 0)
	if i < 0 || p.space(i) != len(b) {
		return false, nil
	}
	return true, p.err
}

// payloadScan checks a payload's syntax as encoding/json's scanner does and,
// on the way, what checkPayload refuses; err keeps the first such refusal,
// the scan going on so that a body also invalid is reported as invalid.
type payloadScan struct {
	b   []byte
	err *Error
}

func (p *payloadScan) space(i int) int {
	b := p.b
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value scans the value at b[i] and returns the index just past it, or -1
// when it is not valid JSON.
func (p *payloadScan) value(i, depth int) int {
	b := p.b
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '{':
		return p.object(i, depth+1)
	case c == '[':
		if depth+1 > maxPayloadDepth {
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
		end := p.number(i)
		if end > 0 && p.err == nil {
			p.err = checkNumber(b[i:end])
		}
		return end
	}
	return -1
}

func (p *payloadScan) literal(i int, lit string) int {
	if len(p.b)-i < len(lit) || string(p.b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *payloadScan) number(i int) int {
	b := p.b
	digits := func(i int) int {
		j := i
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	default:
		if i = digits(i); i < 0 {
			return -1
		}
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

// str scans the string at b[i] == '"': no control characters, escapes
// only \" \\ \/ \b \f \n \r \t and \uXXXX.
func (p *payloadScan) str(i int) int {
	b := p.b
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
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
	return -1
}

// object scans the object at b[i] == '{', refusing (p.err) a property
// named twice.
func (p *payloadScan) object(i, depth int) int {
	if depth > maxPayloadDepth {
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
		if p.err == nil {
			name := b[i+1 : end-1]
			if bytes.IndexByte(name, '\\') >= 0 {
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
				p.err = payloadError("the property name %q appears more than once in one object.", name)
			}
		}
		i = p.space(end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		if i = p.value(p.space(i+1), depth); i < 0 {
			return -1
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
