package engine

import (
	"encoding/json"

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

// CheckPayload is checkPayload for a body the server decodes itself (a
// query's parameters): nil, or a 400 in the service's format. b that is not
// valid JSON is left to the caller's own decoding.
func CheckPayload(b []byte) error {
	if !json.Valid(b) {
		return nil
	}
	if err := checkPayload(b); err != nil {
		return err
	}
	return nil
}
