package engine

import (
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
)

// checkPayload refuses the JSON that parsers read differently (see
// jsondoc.Check) as the service does: a 400 in its words. b must already
// have passed json.Valid.
func checkPayload(b []byte) *Error {
	if err := jsondoc.Check(b); err != nil {
		return BadRequest("%s", err.Error())
	}
	return nil
}

// validPayload is json.Valid and checkPayload in one scan of b (see
// jsondoc.Validate): valid reports whether b is one JSON value, and, when
// it is, perr is checkPayload's 400.
func validPayload(b []byte) (valid bool, perr *Error) {
	valid, err := jsondoc.Validate(b)
	if err != nil {
		return valid, BadRequest("%s", err.Error())
	}
	return valid, nil
}

// ValidPayload is json.Valid and checkPayload in one scan of b, for a body
// the server decodes itself (a query's): valid reports whether b is one
// JSON value, and, when it is, err is checkPayload's 400 in the service's
// format, or nil.
func ValidPayload(b []byte) (valid bool, err error) {
	valid, perr := validPayload(b)
	if perr != nil {
		return valid, perr
	}
	return valid, nil
}
