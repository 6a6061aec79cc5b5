package fulltext

import (
	"fmt"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/de"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/lang/es"
	"github.com/blevesearch/bleve/v2/analysis/lang/fr"
	"github.com/blevesearch/bleve/v2/analysis/lang/it"
	"github.com/blevesearch/bleve/v2/analysis/lang/pt"
	"github.com/blevesearch/bleve/v2/registry"
)

// Languages are the languages a full-text policy may name, as the service
// spells them, with the bleve analyzer of each and the Windows locale ids
// (LCIDs, decimal) that name the same language: the service takes a
// path's language given as "1033" for en-US, and keeps it as given.
var Languages = []struct {
	Code     string
	analyzer string
	LCIDs    []string
}{
	{"en-US", en.AnalyzerName, []string{"1033"}},
	{"fr-FR", fr.AnalyzerName, []string{"1036"}},
	{"de-DE", de.AnalyzerName, []string{"1031"}},
	{"it-IT", it.AnalyzerName, []string{"1040"}},
	{"pt-BR", pt.AnalyzerName, []string{"1046"}},
	{"pt-PT", pt.AnalyzerName, []string{"2070"}},
	{"es-ES", es.AnalyzerName, []string{"3082", "1034"}}, // modern and traditional sort
}

// canonical returns the language code a policy's language names (a code in
// any case, or one of its LCIDs) as the service spells it.
func canonical(lang string) (string, bool) {
	for _, l := range Languages {
		if strings.EqualFold(l.Code, lang) {
			return l.Code, true
		}
		for _, id := range l.LCIDs {
			if id == lang {
				return l.Code, true
			}
		}
	}
	return "", false
}

// DefaultLanguage is the language of a policy that names none.
const DefaultLanguage = "en-US"

// supportedList is the languages as the service's message lists them.
func supportedList() string {
	var codes []string
	for _, l := range Languages {
		codes = append(codes, l.Code)
	}
	return strings.Join(codes, ", ")
}

// Term is one term of an analyzed text and its position: the number of
// tokens before it, stop words included, so that a phrase matches only
// where its words are adjacent.
type Term struct {
	Text string
	Pos  int
}

// Analyzer cuts the text of one language into terms. It is safe for
// concurrent use.
type Analyzer struct {
	lang string
	a    analysis.Analyzer
}

var (
	analyzersMu sync.Mutex
	analyzers   = map[string]*Analyzer{}
	cache       = registry.NewCache()
)

// AnalyzerFor returns the analyzer of a language code (case-insensitive:
// "en-US", "fr-fr", or an LCID: "1033"), or an error naming the supported
// ones.
func AnalyzerFor(lang string) (*Analyzer, error) {
	if lang == "" {
		lang = DefaultLanguage
	}
	code, _ := canonical(lang)
	for _, l := range Languages {
		if l.Code != code {
			continue
		}
		analyzersMu.Lock()
		defer analyzersMu.Unlock()
		if a := analyzers[l.Code]; a != nil {
			return a, nil
		}
		ba, err := cache.AnalyzerNamed(l.analyzer)
		if err != nil {
			return nil, fmt.Errorf("fulltext: bleve analyzer %q: %w", l.analyzer, err)
		}
		a := &Analyzer{lang: l.Code, a: ba}
		analyzers[l.Code] = a
		return a, nil
	}
	return nil, fmt.Errorf("fulltext: unsupported language %s (supported: %s)", lang, supportedList())
}

// Language returns the analyzer's language code.
func (a *Analyzer) Language() string { return a.lang }

// Analyze returns the terms of text, in order.
func (a *Analyzer) Analyze(text string) []Term {
	ts := a.a.Analyze([]byte(text))
	out := make([]Term, 0, len(ts))
	for _, t := range ts {
		if len(t.Term) == 0 {
			continue
		}
		out = append(out, Term{Text: string(t.Term), Pos: t.Position - 1})
	}
	return out
}

// Occurrences counts where the keyword's terms occur in the text's terms,
// adjacent and in order. A keyword with no terms (stop words only) occurs
// nowhere.
func Occurrences(text, keyword []Term) int {
	if len(keyword) == 0 {
		return 0
	}
	n := 0
	for i, t := range text {
		if t.Text != keyword[0].Text {
			continue
		}
		ok := true
		j := i
		for k := 1; k < len(keyword) && ok; k++ {
			want := t.Pos + keyword[k].Pos - keyword[0].Pos
			for j < len(text) && text[j].Pos < want {
				j++
			}
			ok = j < len(text) && text[j].Pos == want && text[j].Text == keyword[k].Text
		}
		if ok {
			n++
		}
	}
	return n
}
