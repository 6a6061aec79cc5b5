package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeQuerySpec is json.Unmarshal of a query body into a querySpec;
// valid is json.Valid(b).
func decodeQuerySpec(b []byte, valid bool) (*querySpec, error) {
	if valid {
		if q, ok := scanQuerySpec(b); ok {
			return q, nil
		}
	}
	q := new(querySpec)
	if err := json.Unmarshal(b, q); err != nil {
		return nil, err
	}
	return q, nil
}

// scanQuerySpec reads a query body as the SDKs send it,
// {"query":"...","parameters":[{"name":"@n","value":...}]}, as
// json.Unmarshal into a querySpec does, without its reflection and most of
// its allocations: every query page decodes one. It takes only bodies whose
// reading is plain: valid JSON, an object whose names are exactly "query"
// (a string) and "parameters" (null or an array of objects named exactly
// "name", a string, and "value"), each once, none written with escapes.
// Anything else (other or case-variant names, which json.Unmarshal
// matches case-insensitively, repeated names, other types, invalid JSON)
// is left to json.Unmarshal (ok false), so its answers and errors stay
// its own. TestAQueryBodyReadsAsUnmarshalReadsIt holds the two equal.
// b must be valid JSON.
func scanQuerySpec(b []byte) (q *querySpec, ok bool) {
	q = new(querySpec)
	var seenQuery, seenParams bool
	ok = scanObject(b, skipJSONSpace(b, 0), func(name, v []byte) bool {
		switch string(name) {
		case "query":
			s, isString := jsonStringValue(v)
			if seenQuery || !isString {
				return false
			}
			q.Query, seenQuery = s, true
			return true
		case "parameters":
			if seenParams {
				return false
			}
			seenParams = true
			if string(v) == "null" {
				return true
			}
			if v[0] != '[' {
				return false
			}
			return scanParameters(q, v)
		}
		return false
	})
	if !ok {
		return nil, false
	}
	return q, true
}

// scanParameters appends the parameters of the array v to q.
func scanParameters(q *querySpec, v []byte) bool {
	i := skipJSONSpace(v, 1)
	if v[i] == ']' {
		q.Parameters = []queryParameter{} // as json.Unmarshal makes it
		return true
	}
	for {
		var p queryParameter
		var seenName, seenValue bool
		end := skipJSONValue(v, i)
		if !scanObject(v[:end], i, func(name, val []byte) bool {
			switch string(name) {
			case "name":
				s, isString := jsonStringValue(val)
				if seenName || !isString {
					return false
				}
				p.Name, seenName = s, true
				return true
			case "value":
				if seenValue {
					return false
				}
				p.Value, seenValue = bytes.Clone(val), true
				return true
			}
			return false
		}) {
			return false
		}
		if q.Parameters == nil {
			q.Parameters = q.own[:0]
		}
		q.Parameters = append(q.Parameters, p)
		i = skipJSONSpace(v, end)
		if v[i] == ']' {
			return true
		}
		i = skipJSONSpace(v, i+1) // past ','
	}
}

// scanObject calls f with each name and value of the object starting at
// b[i] (b valid JSON); false when it is not an object, a name holds an
// escape, or f says false.
func scanObject(b []byte, i int, f func(name, v []byte) bool) bool {
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipJSONSpace(b, i+1)
	for b[i] != '}' {
		start := i + 1
		end := start
		for b[end] != '"' {
			if b[end] == '\\' {
				return false
			}
			end++
		}
		i = skipJSONSpace(b, end+1) // at ':'
		i = skipJSONSpace(b, i+1)
		vend := skipJSONValue(b, i)
		if !f(b[start:end], b[i:vend]) {
			return false
		}
		i = skipJSONSpace(b, vend)
		if b[i] == ',' {
			i = skipJSONSpace(b, i+1)
		}
	}
	return true
}

// jsonStringValue is the string json.Unmarshal reads from the value v, if
// v is a string.
func jsonStringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue returns where the value starting at b[i] ends; b is valid
// JSON.
func skipJSONValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipJSONString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipJSONString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

func skipJSONString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}
