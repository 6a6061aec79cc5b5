package query

import (
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

type tokenKind uint8

const (
	tEOF tokenKind = iota
	tIdent
	tNumber
	tString
	tParam
	tPunct
	tIllegal
)

// token is one lexical unit of the query text.
type token struct {
	kind tokenKind
	pos  int     // byte offset in the text
	text string  // source text (for strings: the decoded value is in str)
	str  string  // decoded string literal
	num  float64 // number literal value
	kw   string  // for identifiers that spell a keyword: the keyword in upper case
}

// keywords holds every word the parser tests for: the reserved words, ROOT
// and the aggregate function names.
var keywords = func() map[string]string {
	m := map[string]string{"ROOT": "ROOT"}
	for w := range reserved {
		m[w] = w
	}
	for w := range aggregateNames {
		m[w] = w
	}
	return m
}()

// keywordOf returns the upper-case keyword w spells (case-insensitively),
// or "" when w is not a keyword. It does not allocate.
func keywordOf(w string) string {
	var buf [16]byte
	if len(w) > len(buf) {
		return ""
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	kw := keywords[string(buf[:len(w)])]
	if lower, ok := lowerOnly[kw]; ok && w != lower {
		return "" // TRUE, Null, UDF... are ordinary identifiers
	}
	return kw
}

// reserved lists the keywords that cannot be used as identifiers, property
// names after '.', or aliases: the keywords of the service's grammar.
// true, false, null, undefined and udf are keywords only in lower case.
var reserved = map[string]bool{
	"AND": true, "ARRAY": true, "AS": true, "ASC": true, "BETWEEN": true, "BY": true,
	"DESC": true, "DISTINCT": true, "ESCAPE": true, "EXISTS": true, "FALSE": true,
	"FROM": true, "GROUP": true, "IN": true, "JOIN": true, "LEFT": true, "LIKE": true,
	"LIMIT": true, "NOT": true, "NULL": true, "OFFSET": true, "OR": true, "ORDER": true,
	"RIGHT": true, "SELECT": true, "TOP": true, "TRUE": true, "UDF": true,
	"UNDEFINED": true, "VALUE": true, "WHERE": true,
}

// lowerOnly lists the keywords recognised only when written in lower case.
var lowerOnly = map[string]string{"TRUE": "true", "FALSE": "false", "NULL": "null", "UNDEFINED": "undefined", "UDF": "udf"}

// lex splits text into tokens; the last token is always tEOF. An
// unrecognised character yields a tIllegal token, reported by the parser.
func lex(text string) []token { return lexInto(make([]token, 0, len(text)/3+4), text) }

// tokenPool recycles token slices between parses; no token outlives its parse.
var tokenPool = sync.Pool{New: func() any { s := make([]token, 0, 64); return &s }}

// lexInto is lex appending to toks.
func lexInto(toks []token, text string) []token {
	i := 0
	for {
		// Skip whitespace and -- comments.
		for i < len(text) {
			c := text[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
				i++
				continue
			}
			if c == '-' && i+1 < len(text) && text[i+1] == '-' {
				for i < len(text) && text[i] != '\n' {
					i++
				}
				continue
			}
			if c >= utf8.RuneSelf {
				r, n := utf8.DecodeRuneInString(text[i:])
				if unicode.IsSpace(r) {
					i += n
					continue
				}
			}
			break
		}
		if i >= len(text) {
			toks = append(toks, token{kind: tEOF, pos: i})
			return toks
		}
		start := i
		c := text[i]
		switch {
		case isIdentStart(c):
			for i < len(text) && isIdentPart(text[i]) {
				i++
			}
			w := text[start:i]
			toks = append(toks, token{kind: tIdent, pos: start, text: w, kw: keywordOf(w)})
		case c == '@':
			i++
			for i < len(text) && isIdentPart(text[i]) {
				i++
			}
			if i == start+1 {
				toks = append(toks, token{kind: tIllegal, pos: start, text: "@"})
				continue
			}
			toks = append(toks, token{kind: tParam, pos: start, text: text[start:i]})
		case isDigit(c) || (c == '.' && i+1 < len(text) && isDigit(text[i+1])):
			toks = append(toks, lexNumber(text, &i))
		case c == '\'' || c == '"':
			toks = append(toks, lexString(text, &i))
		default:
			op := ""
			for _, cand := range []string{">>>", "!=", "<>", "<=", ">=", "<<", ">>", "||", "??"} {
				if strings.HasPrefix(text[i:], cand) {
					op = cand
					break
				}
			}
			if op == "" && strings.IndexByte("+-*/%=<>&|^~!?:.,()[]{}", c) >= 0 {
				op = text[i : i+1]
			}
			if op == "" {
				_, n := utf8.DecodeRuneInString(text[i:])
				toks = append(toks, token{kind: tIllegal, pos: start, text: text[i : i+n]})
				i += n
				continue
			}
			i += len(op)
			toks = append(toks, token{kind: tPunct, pos: start, text: op})
		}
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

func lexNumber(text string, i *int) token {
	start := *i
	j := start
	for j < len(text) && isDigit(text[j]) {
		j++
	}
	if j < len(text) && text[j] == '.' {
		j++
		for j < len(text) && isDigit(text[j]) {
			j++
		}
	}
	if j < len(text) && (text[j] == 'e' || text[j] == 'E') {
		k := j + 1
		if k < len(text) && (text[k] == '+' || text[k] == '-') {
			k++
		}
		if k < len(text) && isDigit(text[k]) {
			for k < len(text) && isDigit(text[k]) {
				k++
			}
			j = k
		}
	}
	*i = j
	f, err := strconv.ParseFloat(text[start:j], 64)
	if err != nil {
		return token{kind: tIllegal, pos: start, text: text[start:j]}
	}
	return token{kind: tNumber, pos: start, text: text[start:j], num: f}
}

func lexString(text string, i *int) token {
	start := *i
	quote := text[start]
	j := start + 1
	var b strings.Builder
	for j < len(text) {
		c := text[j]
		if c == quote {
			*i = j + 1
			return token{kind: tString, pos: start, text: text[start : j+1], str: b.String()}
		}
		if c == '\\' && j+1 < len(text) {
			e := text[j+1]
			j += 2
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				if j+4 <= len(text) {
					if u, err := strconv.ParseUint(text[j:j+4], 16, 32); err == nil {
						r := rune(u)
						j += 4
						if r >= 0xD800 && r < 0xDC00 && j+6 <= len(text) && text[j] == '\\' && text[j+1] == 'u' {
							if u2, err := strconv.ParseUint(text[j+2:j+6], 16, 32); err == nil && u2 >= 0xDC00 && u2 < 0xE000 {
								r = (r-0xD800)<<10 | (rune(u2) - 0xDC00) + 0x10000
								j += 6
							}
						}
						b.WriteRune(r)
						continue
					}
				}
				*i = len(text)
				return token{kind: tIllegal, pos: start, text: text[start:min(j+4, len(text))]}
			default:
				b.WriteByte(e)
			}
			continue
		}
		b.WriteByte(c)
		j++
	}
	*i = len(text)
	return token{kind: tIllegal, pos: start, text: text[start:]}
}
