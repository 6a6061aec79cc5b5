package fulltext

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// PolicyError is a container policy the service refuses: a 400 whose
// message is the service's.
type PolicyError struct{ Message string }

// Error returns the service's message.
func (e *PolicyError) Error() string { return e.Message }

func policyErr(format string, args ...any) error {
	return &PolicyError{Message: fmt.Sprintf(format, args...)}
}

// PathSpec is one entry of fullTextPolicy.fullTextPaths, as written.
type PathSpec struct {
	Path     string `json:"path"`
	Language string `json:"language"`
}

// PolicySpec is a fullTextPolicy as written.
type PolicySpec struct {
	DefaultLanguage string     `json:"defaultLanguage"`
	FullTextPaths   []PathSpec `json:"fullTextPaths"`
}

// Path is a validated full-text path: its language and whether a
// full-text index serves it.
type Path struct {
	Path     string
	Language string
	Indexed  bool
}

// Policy is a container's validated full-text policy.
type Policy struct {
	DefaultLanguage string
	Paths           []Path
}

// Path returns the full-text path p ("/a/b").
func (p *Policy) Path(path string) (Path, bool) {
	if p != nil {
		for _, x := range p.Paths {
			if x.Path == path {
				return x, true
			}
		}
	}
	return Path{}, false
}

// Language returns the language text at path is analyzed in: the path's,
// the policy's default, or en-US.
func (p *Policy) Language(path string) string {
	if x, ok := p.Path(path); ok {
		return x.Language
	}
	if p != nil && p.DefaultLanguage != "" {
		return p.DefaultLanguage
	}
	return DefaultLanguage
}

// ParsePolicy validates a container's fullTextPolicy and
// indexingPolicy.fullTextIndexes (each nil when absent) with the service's
// rules and messages. A full-text policy may be replaced at any time (the
// engine rebuilds the indexes). Errors are *PolicyError.
func ParsePolicy(policy, indexes json.RawMessage) (*Policy, error) {
	var spec PolicySpec
	if len(policy) > 0 && string(policy) != "null" {
		if err := decode(policy, &spec); err != nil {
			return nil, err
		}
	}
	var ixs []map[string]json.RawMessage
	if len(indexes) > 0 && string(indexes) != "null" {
		if err := decode(indexes, &ixs); err != nil {
			return nil, err
		}
	}
	p := &Policy{DefaultLanguage: DefaultLanguage}
	if spec.DefaultLanguage != "" {
		lang, err := language(spec.DefaultLanguage)
		if err != nil {
			return nil, err
		}
		p.DefaultLanguage = lang
	}
	for _, ps := range spec.FullTextPaths {
		if !validPath(ps.Path) {
			return nil, policyErr("The Full Text Policy contains an invalid Path: %s", ps.Path)
		}
		lang := p.DefaultLanguage
		if ps.Language != "" {
			var err error
			if lang, err = language(ps.Language); err != nil {
				return nil, err
			}
		}
		if _, dup := p.Path(ps.Path); dup {
			return nil, policyErr("The Full Text Policy contains a duplicate Path: %s", ps.Path)
		}
		p.Paths = append(p.Paths, Path{Path: ps.Path, Language: lang})
	}
	for i, ix := range ixs {
		raw, ok := ix["path"]
		if !ok {
			return nil, policyErr("Missing path in full-text index specification at index (%d)", i)
		}
		var path string
		if json.Unmarshal(raw, &path) != nil || !validPath(path) {
			return nil, policyErr("Full-text index specification at index (%d) contains invalid path", i)
		}
		found := false
		for j := range p.Paths {
			if p.Paths[j].Path == path {
				p.Paths[j].Indexed, found = true, true
			}
		}
		if !found {
			return nil, policyErr("The path of the Full Text Index %s does not match the path specified in the Full Text Policy", path)
		}
	}
	return p, nil
}

// language checks a language code (or LCID) and returns the code as the
// service spells it.
func language(code string) (string, error) {
	if c, ok := canonical(code); ok {
		return c, nil
	}
	return "", policyErr("The Full Text Policy contains an unsupported language %s. Supported languages are: %s", code, supportedList())
}

func decode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &PolicyError{Message: "One of the specified inputs is invalid"}
		}
		return &PolicyError{Message: "One of the specified inputs is invalid: " + err.Error()}
	}
	return nil
}

// validPath reports whether p is a property path: "/a/b", no wildcards.
func validPath(p string) bool {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "*" || seg == "?" || strings.Contains(seg, "[]") {
			return false
		}
	}
	return true
}
