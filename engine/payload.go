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
