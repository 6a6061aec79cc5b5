package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Resource is a database, container, script or offer as the service returns it:
// its JSON body (system properties included) and its ETag.
type Resource struct {
	ID   string
	RID  string
	Body []byte
	ETag string
}

// formatETag renders the ETag of a write: unique per write because LSNs are,
// quoted as the service quotes them.
func formatETag(lsn uint64, salt uint64) string {
	return fmt.Sprintf("\"%08x-%04x-0000-0000-%012x\"", uint32(lsn>>32), uint16(salt), lsn&0xFFFFFFFFFFFF)
}

// decodeObject parses a request body that must be a JSON object.
func decodeObject(body []byte) (map[string]any, *Error) {
	if len(body) == 0 {
		return nil, BadRequest("The request body is empty; a JSON object is required.")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, BadRequest("The request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, BadRequest("The request body has content after the JSON value.")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, BadRequest("The request body must be a JSON object.")
	}
	if perr := checkPayload(body); perr != nil {
		return nil, perr
	}
	return m, nil
}

func stringProp(m map[string]any, name string) (string, bool) {
	s, ok := m[name].(string)
	return s, ok
}

// wholeNumber reads a JSON number decoded with UseNumber (or as float64)
// that is a whole number.
func wholeNumber(v any) (int, bool) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	case float64:
		f = n
	default:
		return 0, false
	}
	if f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}
