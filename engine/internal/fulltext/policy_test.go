package fulltext

import (
	"encoding/json"
	"strings"
	"testing"
)

// A full-text policy the service takes is taken: languages per path, the
// default's for a path without one, the paths a full-text index serves.
func TestPolicyTakesWhatTheServiceTakes(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(`{"defaultLanguage":"fr-FR","fullTextPaths":[{"path":"/abstract","language":"en-US"},{"path":"/title"}]}`),
		json.RawMessage(`[{"path":"/abstract"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Language("/abstract") != "en-US" || p.Language("/title") != "fr-FR" || p.Language("/other") != "fr-FR" {
		t.Fatalf("languages %+v", p)
	}
	if a, _ := p.Path("/abstract"); !a.Indexed {
		t.Fatal("/abstract is indexed")
	}
	if _, err := ParsePolicy(json.RawMessage(`{"defaultLanguage":"en-US"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range Languages {
		if _, err := ParsePolicy(json.RawMessage(`{"defaultLanguage":"`+l.Code+`","fullTextPaths":[{"path":"/a","language":"`+l.Code+`"}]}`), nil); err != nil {
			t.Errorf("%s: %v", l.Code, err)
		}
	}
}

// A policy the service refuses is refused with the service's message.
func TestPolicyRefusesWithTheServicesMessages(t *testing.T) {
	for _, tc := range []struct{ policy, indexes, want string }{
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"abstract","language":"en-US"}]}`, "", "The Full Text Policy contains an invalid Path: abstract"},
		{`{"defaultLanguage":"spa-SPA","fullTextPaths":[{"path":"/abstract","language":"en-US"}]}`, "", "The Full Text Policy contains an unsupported language spa-SPA. Supported languages are: en-US, fr-FR, de-DE, it-IT, pt-BR, pt-PT, es-ES"},
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/abstract","language":"spa-SPA"}]}`, "", "The Full Text Policy contains an unsupported language spa-SPA. Supported languages are:"},
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/abstract"}]}`, `[{"path":"/path"}]`, "The path of the Full Text Index /path does not match the path specified in the Full Text Policy"},
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/abstract"}]}`, `[{"path":"abstract"}]`, "Full-text index specification at index (0) contains invalid path"},
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/abstract"}]}`, `[{"not_path":"abstract"}]`, "Missing path in full-text index specification at index (0)"},
		{`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/a/*"}]}`, "", "invalid Path: /a/*"},
		{`{"fullTextPaths":"/a"}`, "", "One of the specified inputs is invalid"},
	} {
		_, err := ParsePolicy(json.RawMessage(tc.policy), json.RawMessage(tc.indexes))
		pe, ok := err.(*PolicyError)
		if !ok || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.policy, tc.indexes, err, tc.want)
		}
	}
}

// A path's language given as a Windows locale id, as the service takes
// "1033" for en-US, names that language; an id of no supported language is
// refused as an unknown code is.
func TestPolicyTakesALanguageGivenAsItsLCID(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/a","language":"1033"},{"path":"/b","language":"1036"},{"path":"/c","language":"3082"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Language("/a") != "en-US" || p.Language("/b") != "fr-FR" || p.Language("/c") != "es-ES" {
		t.Fatalf("languages %+v", p.Paths)
	}
	if a, err := AnalyzerFor("1033"); err != nil || a.Language() != "en-US" {
		t.Fatalf("AnalyzerFor(1033): %v %v", a, err)
	}
	_, err = ParsePolicy(json.RawMessage(`{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/a","language":"1041"}]}`), nil)
	if pe, ok := err.(*PolicyError); !ok || !strings.Contains(pe.Message, "unsupported language 1041") {
		t.Fatalf("LCID 1041 (ja-JP): %v", err)
	}
}
