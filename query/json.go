package query

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// errBadJSON is returned when a document or parameter is not valid JSON.
var errBadJSON = errors.New("invalid JSON")

// decodeJSON parses one JSON value (with optional surrounding whitespace).
func decodeJSON(data []byte) (value, error) { return decodeDocument(data, nil, false) }

// decodeDocument is decodeJSON for a document of which only the top-level
// properties in fields are needed (all of them when fields is nil); the
// values of the others are checked for well-formedness and skipped without
// being materialised. With keepRaw, the query also writes the document out
// whole: a partially decoded document keeps its text for that when the text
// is canonical, and is decoded whole when it is not.
func decodeDocument(data []byte, fields map[string]bool, keepRaw bool) (value, error) {
	// One copy of the whole text; unescaped strings and keys are substrings
	// of it, which saves an allocation per string.
	d := decoderPool.Get().(*jsonDecoder)
	defer decoderPool.Put(d)
	d.data, d.pos = string(data), 0
	d.keys, d.vals, d.items = d.keys[:0], d.vals[:0], d.items[:0]
	d.fields = fields
	d.keepRaw = keepRaw && fields != nil
	d.loose = false
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return undef, err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return undef, errBadJSON
	}
	if d.keepRaw && v.k == kObject {
		if d.loose {
			// Skipped properties are needed to write the document out, and
			// its text is not canonical: decode it whole.
			d.data = ""
			return decodeDocument(data, nil, false)
		}
		v.object().raw = d.data
	}
	d.data = ""
	return v, nil
}

// decoderPool recycles decoders so their scratch stacks are reused.
var decoderPool = sync.Pool{New: func() any { return new(jsonDecoder) }}

type jsonDecoder struct {
	data string
	pos  int
	// Scratch stacks shared by nested containers: members are collected
	// here and copied out in one exactly-sized allocation per container.
	keys  []string
	vals  []value // object members, aligned with keys
	items []value // array elements
	// fields, when not nil, lists the only top-level properties to decode.
	fields map[string]bool
	// keepRaw asks for the document's text to be kept (see decodeDocument).
	keepRaw bool
	// loose records that the text is not exactly what appendJSON would
	// write (insignificant whitespace, a number or escape in another form,
	// a duplicate key), so the text cannot stand in for the value.
	loose bool
}

const maxJSONDepth = 1000

func (d *jsonDecoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
			d.loose = true
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (value, error) {
	if depth > maxJSONDepth || d.pos >= len(d.data) {
		return undef, errBadJSON
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		d.pos++
		base := len(d.keys)
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			return objV(&object{}), nil
		}
		for {
			d.skipWS()
			if d.pos >= len(d.data) || d.data[d.pos] != '"' {
				return undef, errBadJSON
			}
			k, err := d.str()
			if err != nil {
				return undef, err
			}
			d.skipWS()
			if d.pos >= len(d.data) || d.data[d.pos] != ':' {
				return undef, errBadJSON
			}
			d.pos++
			d.skipWS()
			if depth == 0 && d.fields != nil && !d.fields[k] {
				if err := d.skip(depth + 1); err != nil {
					return undef, err
				}
				d.skipWS()
				if d.pos < len(d.data) && d.data[d.pos] == ',' {
					d.pos++
					continue
				}
				if d.pos < len(d.data) && d.data[d.pos] == '}' {
					d.pos++
					o := &object{keys: append([]string(nil), d.keys[base:]...), vals: append([]value(nil), d.vals[base:]...)}
					d.keys, d.vals = d.keys[:base], d.vals[:base]
					return objV(o), nil
				}
				return undef, errBadJSON
			}
			v, err := d.value(depth + 1)
			if err != nil {
				return undef, err
			}
			dup := false
			for i := base; i < len(d.keys); i++ {
				if d.keys[i] == k {
					d.vals[i] = v // the last duplicate wins, as in JavaScript
					dup = true
					d.loose = true
					break
				}
			}
			if !dup {
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			d.skipWS()
			if d.pos >= len(d.data) {
				return undef, errBadJSON
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == '}' {
				d.pos++
				o := &object{keys: append([]string(nil), d.keys[base:]...), vals: append([]value(nil), d.vals[base:]...)}
				d.keys, d.vals = d.keys[:base], d.vals[:base]
				return objV(o), nil
			}
			return undef, errBadJSON
		}
	case c == '[':
		d.pos++
		base := len(d.items)
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			return arrV([]value{}), nil
		}
		for {
			d.skipWS()
			v, err := d.value(depth + 1)
			if err != nil {
				return undef, err
			}
			d.items = append(d.items, v)
			d.skipWS()
			if d.pos >= len(d.data) {
				return undef, errBadJSON
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == ']' {
				d.pos++
				arr := append([]value(nil), d.items[base:]...)
				d.items = d.items[:base]
				return arrV(arr), nil
			}
			return undef, errBadJSON
		}
	case c == '"':
		s, err := d.str()
		if err != nil {
			return undef, err
		}
		return strV(s), nil
	case c == 't':
		return d.lit("true", trueValue)
	case c == 'f':
		return d.lit("false", falseVal)
	case c == 'n':
		return d.lit("null", nullValue)
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.pos
		if c == '-' {
			d.pos++
		}
		digits := 0
		for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
			d.pos++
			digits++
		}
		if digits == 0 || (digits > 1 && d.data[d.pos-digits] == '0') {
			return undef, errBadJSON // no digits, or a leading zero
		}
		if d.pos < len(d.data) && d.data[d.pos] == '.' {
			d.pos++
			fd := 0
			for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
				d.pos++
				fd++
			}
			if fd == 0 {
				return undef, errBadJSON
			}
		}
		if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
			d.pos++
			if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
				d.pos++
			}
			ed := 0
			for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
				d.pos++
				ed++
			}
			if ed == 0 {
				return undef, errBadJSON
			}
		}
		lit := d.data[start:d.pos]
		if d.pos-start <= 15 && !d.fractional(start) {
			if lit == "-0" {
				d.loose = true
			}
			return numV(parseSmallInt(lit)), nil
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !math.IsInf(f, 0) {
			return undef, errBadJSON
		}
		if d.keepRaw && !d.loose {
			var buf [32]byte
			if string(appendNumber(buf[:0], f)) != lit {
				d.loose = true // 1.0, 1e2, ... are written differently
			}
		}
		return numV(f), nil
	}
	return undef, errBadJSON
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *jsonDecoder) lit(word string, v value) (value, error) {
	if len(d.data)-d.pos < len(word) || d.data[d.pos:d.pos+len(word)] != word {
		return undef, errBadJSON
	}
	d.pos += len(word)
	return v, nil
}

// str decodes a JSON string starting at the opening quote.
func (d *jsonDecoder) str() (string, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		d.pos++
	}
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), nil
		case c < 0x20:
			return "", errBadJSON
		case c == '\\':
			d.pos++
			if d.pos >= len(d.data) {
				return "", errBadJSON
			}
			e := d.data[d.pos]
			d.pos++
			if e != '"' && e != '\\' && e != 'n' && e != 'r' && e != 't' {
				d.loose = true // appendJSON would write this character another way
			}
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", errBadJSON
				}
				if utf16.IsSurrogate(r) {
					if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
						save := d.pos
						d.pos += 2
						r2, ok := d.hex4()
						if ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								buf = utf8.AppendRune(buf, dec)
								continue
							}
						}
						d.pos = save
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", errBadJSON
			}
		default:
			buf = append(buf, c)
			d.pos++
		}
	}
	return "", errBadJSON
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := d.data[d.pos+i]
		var h byte
		switch {
		case c >= '0' && c <= '9':
			h = c - '0'
		case c >= 'a' && c <= 'f':
			h = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			h = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	d.pos += 4
	return r, true
}

// appendJSON appends the JSON encoding of v (which must be defined).
// Undefined properties of objects and undefined array elements are omitted.
func appendJSON(buf []byte, v value) []byte {
	switch v.k {
	case kUndefined, kNull:
		return append(buf, "null"...)
	case kBool:
		if v.b {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case kNumber:
		return appendNumber(buf, v.n)
	case kString:
		return appendString(buf, v.str())
	case kArray:
		buf = append(buf, '[')
		first := true
		for _, e := range v.array() {
			if !e.defined() {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendJSON(buf, e)
		}
		return append(buf, ']')
	case kObject:
		if raw := v.object().raw; raw != "" {
			return append(buf, raw...)
		}
		buf = append(buf, '{')
		first := true
		for i, k := range v.object().keys {
			e := v.object().vals[i]
			if !e.defined() {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = appendJSON(buf, e)
		}
		return append(buf, '}')
	}
	return buf
}

// appendNumber formats f the way JavaScript's Number#toString does, which is
// what the service emits.
func appendNumber(buf []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(buf, "null"...)
	}
	if f == 0 {
		return append(buf, '0')
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(buf, f, 'f', -1, 64)
	}
	b := strconv.AppendFloat(nil, f, 'e', -1, 64)
	// Go writes e-07 / e+21; JavaScript writes e-7 / e+21.
	for i := 0; i < len(b); i++ {
		if b[i] == 'e' {
			j := i + 2
			for j < len(b)-1 && b[j] == '0' {
				b = append(b[:j], b[j+1:]...)
			}
			break
		}
	}
	return append(buf, b...)
}

const hexDigits = "0123456789abcdef"

func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// encodeJSON returns the JSON encoding of v as a new slice.
func encodeJSON(v value) []byte { return appendJSON(nil, v) }

// fractional reports whether the number literal starting at start has a
// fraction or an exponent.
func (d *jsonDecoder) fractional(start int) bool {
	for i := start; i < d.pos; i++ {
		if c := d.data[i]; c == '.' || c == 'e' || c == 'E' {
			return true
		}
	}
	return false
}

// parseSmallInt parses an optionally negative integer of at most 15
// digits, which a float64 represents exactly.
func parseSmallInt(s string) float64 {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var n int64
	for i := 0; i < len(s); i++ {
		n = n*10 + int64(s[i]-'0')
	}
	if neg {
		if n == 0 {
			return math.Copysign(0, -1)
		}
		return float64(-n)
	}
	return float64(n)
}

// skip passes over one JSON value, checking its structure but building
// nothing: strings are scanned for their closing quote and escapes, numbers
// and literals for their characters.
func (d *jsonDecoder) skip(depth int) error {
	if depth > maxJSONDepth || d.pos >= len(d.data) {
		return errBadJSON
	}
	switch c := d.data[d.pos]; {
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.pos++
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == closer {
			d.pos++
			return nil
		}
		for {
			d.skipWS()
			if c == '{' {
				if d.pos >= len(d.data) || d.data[d.pos] != '"' {
					return errBadJSON
				}
				if err := d.skipString(); err != nil {
					return err
				}
				d.skipWS()
				if d.pos >= len(d.data) || d.data[d.pos] != ':' {
					return errBadJSON
				}
				d.pos++
				d.skipWS()
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.skipWS()
			if d.pos >= len(d.data) {
				return errBadJSON
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == closer {
				d.pos++
				return nil
			}
			return errBadJSON
		}
	case c == '"':
		return d.skipString()
	}
	// Numbers and literals: decoding them allocates nothing.
	_, err := d.value(depth)
	return err
}

// skipString passes over a string starting at its opening quote.
func (d *jsonDecoder) skipString() error {
	d.pos++
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return nil
		case c < 0x20:
			return errBadJSON
		case c == '\\':
			if d.pos+1 < len(d.data) {
				if e := d.data[d.pos+1]; e != '"' && e != '\\' && e != 'n' && e != 'r' && e != 't' {
					d.loose = true
				}
			}
			d.pos += 2
		default:
			d.pos++
		}
	}
	return errBadJSON
}
