package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Check refuses the JSON that parsers read differently, so that no client
// can read back a document whose meaning depends on its parser: a number
// beyond the range of a double (1e400: Infinity in JavaScript, an error in
// Go's and .NET's decoders, a big integer in Python) and an object naming a
// property twice ({"id":"a","id":"b"}: the first value for some decoders,
// the last for others). b must already have passed json.Valid, which also
// bounds its nesting. The error's text is the service's message.
func Check(b []byte) error {
	_, err := checkValue(b, SkipSpace(b, 0))
	return err
}

// checkError is a refused document, in the service's words.
func checkError(format string, args ...any) error {
	return fmt.Errorf("The request payload is invalid: "+format+" Ensure to provide a valid request payload.", args...)
}

// checkValue checks the value at b[i] and returns the index just past it.
func checkValue(b []byte, i int) (int, error) {
	switch b[i] {
	case '{':
		return checkObject(b, i)
	case '[':
		i = SkipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := checkValue(b, i)
			if err != nil {
				return 0, err
			}
			i = SkipSpace(b, end)
			if b[i] == ']' {
				return i + 1, nil
			}
			i = SkipSpace(b, i+1) // ','
		}
	case '"':
		return SkipString(b, i), nil
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
func checkNumber(n []byte) error {
	if len(n) <= 16 && bytes.IndexAny(n, "eE") < 0 {
		return nil
	}
	if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
		shown := string(n)
		if len(shown) > 24 {
			shown = shown[:20] + "..." + " (" + strconv.Itoa(len(n)) + " characters)"
		}
		return checkError("the number %s is outside the range of a double-precision number (about ±1.8e308).", shown)
	}
	return nil
}

// checkObject checks the object at b[i] and returns the index just past it.
func checkObject(b []byte, i int) (int, error) {
	var first [16][]byte // the names of most objects, without an allocation
	names := first[:0]
	var seen map[string]struct{}
	i = SkipSpace(b, i+1)
	if b[i] == '}' {
		return i + 1, nil
	}
	for {
		end := SkipString(b, i)
		name := b[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return 0, checkError("a property name is not a valid JSON string.")
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
			return 0, checkError("the property name %q appears more than once in one object.", name)
		}
		i = SkipSpace(b, end)
		i = SkipSpace(b, i+1) // ':'
		vend, err := checkValue(b, i)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, vend)
		if b[i] == '}' {
			return i + 1, nil
		}
		i = SkipSpace(b, i+1) // ','
	}
}
