package engine

import (
	"fmt"
	"strings"
)

// validateIndexingPolicy refuses an indexing policy the service refuses: an
// unknown indexingMode, an automatic that is not a boolean, included or
// excluded paths that are not a list of {"path": "/.../*" or "/.../?"}. It
// runs before the defaults are filled in; the vector, full-text, composite
// and spatial parts are checked where they are read. A path "/" (the first
// policy format's root) is rewritten to "/*" in place.
func validateIndexingPolicy(v any) *Error {
	if v == nil {
		return nil
	}
	ip, ok := v.(map[string]any)
	if !ok {
		return BadRequest("The indexingPolicy must be a JSON object, not %s.", policyValue(v))
	}
	if m, ok := ip["indexingMode"]; ok && m != nil {
		s, _ := m.(string)
		switch strings.ToLower(s) {
		case "consistent", "lazy", "none":
		default:
			return BadRequest("The indexing mode %s is invalid: it must be one of consistent, lazy or none.", policyValue(m))
		}
	}
	if a, ok := ip["automatic"]; ok && a != nil {
		if _, ok := a.(bool); !ok {
			return BadRequest("The indexing policy's automatic value %s is invalid: it must be true or false.", policyValue(a))
		}
	}
	for _, name := range []string{"includedPaths", "excludedPaths"} {
		raw, ok := ip[name]
		if !ok || raw == nil {
			continue
		}
		list, ok := raw.([]any)
		if !ok {
			return BadRequest("The indexing policy's %s must be a list of paths, not %s.", name, policyValue(raw))
		}
		for i, e := range list {
			entry, ok := e.(map[string]any)
			if !ok {
				return BadRequest("The indexing policy's %s[%d] must be an object with a path, not %s.", name, i, policyValue(e))
			}
			p, ok := entry["path"].(string)
			if ok && p == "/" {
				// The first policy format's root path: the service reads
				// it as the root of the current format.
				p = "/*"
				entry["path"] = p
			}
			if !ok {
				return BadRequest("The indexing path %s in %s[%d] could not be accepted: it must be a string such as \"/*\" or \"/name/?\".", policyValue(entry["path"]), name, i)
			}
			if at := badIndexPath(p); at >= 0 {
				return BadRequest("The indexing path '%s' could not be accepted, failed near position %d. Please ensure that the path is a valid path. Common errors include invalid characters or absence of quotes around labels.", p, at)
			}
		}
	}
	return nil
}

// badIndexPath returns where an included or excluded path goes wrong, or -1:
// it must start with '/' and end with "/*" or "/?".
func badIndexPath(p string) int {
	switch {
	case !strings.HasPrefix(p, "/"):
		return 0
	case p == "/*" || p == "/?" || p == "/":
		return -1 // "/" is the legacy form of "/*"
	case strings.HasSuffix(p, "/*") || strings.HasSuffix(p, "/?"):
		return -1
	}
	return len(p)
}

// policyValue renders a policy value for a message.
func policyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "'" + x + "'"
	default:
		return fmt.Sprint(x)
	}
}
