package jsondoc

import (
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
	_, err := Validate(b)
	return err
}

// checkError is a refused document, in the service's words.
func checkError(format string, args ...any) error {
	return fmt.Errorf("The request payload is invalid: "+format+" Ensure to provide a valid request payload.", args...)
}

// checkNumber refuses a number that overflows a double. Fifteen digits or
// fewer without an exponent always fit; a number that underflows reads as
// zero or a subnormal everywhere and is kept as sent.
func checkNumber(n []byte) error {
	if len(n) <= 16 {
		// No exponent: c|0x20 is 'e' for 'e' and 'E' only (IndexAny
		// built its set of bytes on every number of every body).
		exp := false
		for _, c := range n {
			exp = exp || c|0x20 == 'e'
		}
		if !exp {
			return nil
		}
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
