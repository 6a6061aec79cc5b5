package uniquepolicy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Policy is the parsed uniqueKeyPolicy: each unique key's paths, as
// property names from the root.
type Policy [][][]string

// Parse reads and checks a container's uniqueKeyPolicy property (absent or
// null: none). Its error's text is the service's message for a bad
// request.
func Parse(v any) (Policy, error) {
	if v == nil {
		return nil, nil
	}
	raw, _ := json.Marshal(v)
	var p struct {
		UniqueKeys []struct {
			Paths []string `json:"paths"`
		} `json:"uniqueKeys"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("The uniqueKeyPolicy property is invalid: %v", err)
	}
	var out Policy
	seen := map[string]bool{}
	for i, uk := range p.UniqueKeys {
		if len(uk.Paths) == 0 {
			return nil, fmt.Errorf("The unique key %d of the uniqueKeyPolicy has no paths.", i)
		}
		var key [][]string
		for _, path := range uk.Paths {
			segs, ok := Path(path)
			if !ok {
				return nil, fmt.Errorf("The unique key path %q is invalid: a unique key path names one property from the root, such as \"/email\" or \"/address/zipCode\", without wildcards or array indexes.", path)
			}
			if seen[path] {
				return nil, fmt.Errorf("The unique key path %q appears more than once in the uniqueKeyPolicy.", path)
			}
			seen[path] = true
			key = append(key, segs)
		}
		out = append(out, key)
	}
	return out, nil
}

// Path splits a unique key path such as /a/b into its property names
// (quotes around a name removed); ok is false for a path that does not
// name one property from the root.
func Path(path string) ([]string, bool) {
	if !strings.HasPrefix(path, "/") || len(path) < 2 || strings.ContainsAny(path, "*[]?") {
		return nil, false
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		if s == "" {
			return nil, false
		}
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			segs[i] = s[1 : len(s)-1]
		}
	}
	return segs, true
}
