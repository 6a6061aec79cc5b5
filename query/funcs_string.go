package query

import (
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// maxStringResult bounds strings built by REPLICATE, as the service does.
const maxStringResult = 10000

func init() {
	register("CONCAT", 2, -1, func(_ *evalCtx, a []value) value {
		var b strings.Builder
		for i := range a {
			s, ok := argStr(a, i)
			if !ok {
				return undef
			}
			b.WriteString(s)
		}
		return strV(b.String())
	})
	register("CONTAINS", 2, 3, stringPredicate(strings.Contains))
	register("STARTSWITH", 2, 3, stringPredicate(strings.HasPrefix))
	register("ENDSWITH", 2, 3, stringPredicate(strings.HasSuffix))
	register("STRINGEQUALS", 2, 3, stringPredicate(func(a, b string) bool { return a == b }))
	register("INDEX_OF", 2, 3, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		sub, ok2 := argStr(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		rs := []rune(s)
		start := int64(0)
		if len(a) > 2 {
			var ok bool
			if start, ok = argInt(a, 2); !ok {
				return undef
			}
		}
		if start < 0 || start > int64(len(rs)) {
			return numV(-1)
		}
		i := strings.Index(string(rs[start:]), sub)
		if i < 0 {
			return numV(-1)
		}
		return numV(float64(start) + float64(utf8.RuneCountInString(string(rs[start:])[:i])))
	})
	register("LEFT", 2, 2, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		n, ok2 := argInt(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return strV(substring(s, 0, n))
	})
	register("RIGHT", 2, 2, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		n, ok2 := argInt(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		l := int64(utf8.RuneCountInString(s))
		return strV(substring(s, max(l-n, 0), l))
	})
	register("LENGTH", 1, 1, func(_ *evalCtx, a []value) value {
		s, ok := argStr(a, 0)
		if !ok {
			return undef
		}
		return numV(float64(utf8.RuneCountInString(s)))
	})
	stringMap := func(name string, f func(string) string) {
		register(name, 1, 1, func(_ *evalCtx, a []value) value {
			s, ok := argStr(a, 0)
			if !ok {
				return undef
			}
			return strV(f(s))
		})
	}
	stringMap("LOWER", strings.ToLower)
	stringMap("UPPER", strings.ToUpper)
	trim := func(name string, byFunc func(string, func(rune) bool) string, byCutset func(string, string) string) {
		register(name, 1, 2, func(_ *evalCtx, a []value) value {
			s, ok := argStr(a, 0)
			if !ok {
				return undef
			}
			if len(a) == 1 {
				return strV(byFunc(s, unicode.IsSpace))
			}
			cut, ok := argStr(a, 1)
			if !ok {
				return undef
			}
			return strV(byCutset(s, cut))
		})
	}
	trim("LTRIM", strings.TrimLeftFunc, strings.TrimLeft)
	trim("RTRIM", strings.TrimRightFunc, strings.TrimRight)
	trim("TRIM", strings.TrimFunc, strings.Trim)
	stringMap("REVERSE", func(s string) string {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs)
	})
	register("REPLACE", 3, 3, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		from, ok2 := argStr(a, 1)
		to, ok3 := argStr(a, 2)
		if !ok1 || !ok2 || !ok3 {
			return undef
		}
		if from == "" {
			return strV(s)
		}
		return strV(strings.ReplaceAll(s, from, to))
	})
	register("REPLICATE", 2, 2, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		f, ok2 := argNum(a, 1)
		if !ok1 || !ok2 || f < 0 || !isFinite(f) {
			return undef
		}
		n := int(f)
		if n > 0 && utf8.RuneCountInString(s)*n > maxStringResult {
			return undef
		}
		return strV(strings.Repeat(s, n))
	})
	register("SUBSTRING", 3, 3, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		start, ok2 := argInt(a, 1)
		n, ok3 := argInt(a, 2)
		if !ok1 || !ok2 || !ok3 {
			return undef
		}
		return strV(substring(s, start, n))
	})
	register("TOSTRING", 1, 1, func(_ *evalCtx, a []value) value {
		switch a[0].k {
		case kUndefined:
			return undef
		case kString:
			return a[0]
		case kNumber:
			switch {
			case math.IsNaN(a[0].n):
				return strV("NaN")
			case math.IsInf(a[0].n, 1):
				return strV("Infinity")
			case math.IsInf(a[0].n, -1):
				return strV("-Infinity")
			}
		}
		return strV(string(encodeJSON(a[0])))
	})
	register("STRINGTOARRAY", 1, 1, stringToKind(kArray))
	register("STRINGTOBOOLEAN", 1, 1, stringToKind(kBool))
	register("STRINGTONULL", 1, 1, stringToKind(kNull))
	register("STRINGTONUMBER", 1, 1, stringToKind(kNumber))
	register("STRINGTOOBJECT", 1, 1, stringToKind(kObject))
	register("REGEXMATCH", 2, 3, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		pat, ok2 := argStr(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		mods := ""
		if len(a) > 2 {
			var ok bool
			if mods, ok = argStr(a, 2); !ok {
				return undef
			}
		}
		re := compileRegex(pat, mods)
		if re == nil {
			return undef
		}
		return boolV(re.MatchString(s))
	})
	register("STRINGSPLIT", 2, 2, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		sep, ok2 := argStr(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		if sep == "" {
			return arrV([]value{strV(s)})
		}
		parts := strings.Split(s, sep)
		out := make([]value, len(parts))
		for i, p := range parts {
			out[i] = strV(p)
		}
		return arrV(out)
	})
	// SUBSTRINGAFTER, SUBSTRINGBEFORE and their LAST forms split at the
	// first or last occurrence of a delimiter. When the delimiter does not
	// occur they answer "" (the documentation shows only found delimiters).
	register("SUBSTRINGAFTER", 2, 2, splitAt(strings.Index, true))
	register("SUBSTRINGBEFORE", 2, 2, splitAt(strings.Index, false))
	register("LASTSUBSTRINGAFTER", 2, 2, splitAt(strings.LastIndex, true))
	register("LASTSUBSTRINGBEFORE", 2, 2, splitAt(strings.LastIndex, false))
	register("STRINGJOIN", 2, 2, func(_ *evalCtx, a []value) value {
		sep, ok := argStr(a, 1)
		if a[0].k != kArray || !ok {
			return undef
		}
		parts := make([]string, len(a[0].array()))
		for i, el := range a[0].array() {
			if el.k != kString {
				return undef
			}
			parts[i] = el.str()
		}
		return strV(strings.Join(parts, sep))
	})
}

// stringPredicate builds CONTAINS/STARTSWITH/ENDSWITH/StringEquals with the
// optional ignoreCase third argument.
func stringPredicate(f func(s, t string) bool) func(*evalCtx, []value) value {
	return func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		t, ok2 := argStr(a, 1)
		ic, ok3 := argOptBool(a, 2)
		if !ok1 || !ok2 || !ok3 {
			return undef
		}
		if ic {
			s, t = strings.ToLower(s), strings.ToLower(t)
		}
		return boolV(f(s, t))
	}
}

// stringToKind parses a JSON string and keeps it only if it has kind k.
func stringToKind(k kind) func(*evalCtx, []value) value {
	return func(_ *evalCtx, a []value) value {
		s, ok := argStr(a, 0)
		if !ok {
			return undef
		}
		v, err := decodeJSON([]byte(s))
		if err != nil || v.k != k {
			return undef
		}
		return v
	}
}

// regexCache holds compiled RegexMatch patterns (keyed by modifiers and
// pattern) so a scan does not recompile per document; it stops growing at
// maxCachedRegexes entries.
var (
	regexCache      sync.Map
	regexCacheSize  atomic.Int64
	errInvalidRegex = &regexp.Regexp{}
)

const maxCachedRegexes = 1024

// compileRegex compiles a pattern with the service's modifiers (m, s, i, x);
// it returns nil for an invalid pattern or modifier.
func compileRegex(pat, mods string) *regexp.Regexp {
	key := mods + "\x00" + pat
	if re, ok := regexCache.Load(key); ok {
		if re == errInvalidRegex {
			return nil
		}
		return re.(*regexp.Regexp)
	}
	re := buildRegex(pat, mods)
	if regexCacheSize.Load() < maxCachedRegexes {
		stored := re
		if stored == nil {
			stored = errInvalidRegex
		}
		if _, loaded := regexCache.LoadOrStore(key, stored); !loaded {
			regexCacheSize.Add(1)
		}
	}
	return re
}

// buildRegex translates the modifiers and compiles the pattern.
func buildRegex(pat, mods string) *regexp.Regexp {
	flags := ""
	for _, m := range mods {
		switch m {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, m) {
				flags += string(m)
			}
		case 'x':
			var b strings.Builder
			esc := false
			for _, r := range pat {
				if !esc && unicode.IsSpace(r) {
					continue
				}
				esc = !esc && r == '\\'
				b.WriteRune(r)
			}
			pat = b.String()
		default:
			return nil
		}
	}
	if flags != "" {
		pat = "(?" + flags + ")" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil
	}
	return re
}

// substring is SUBSTRING's rule, shared by LEFT and RIGHT: a start outside
// the string or a non-positive length gives "", a long length is clipped.
func substring(s string, start, n int64) string {
	rs := []rune(s)
	if start < 0 || start >= int64(len(rs)) || n <= 0 {
		return ""
	}
	return string(rs[start:min(int64(len(rs)), start+n)])
}

// splitAt builds a function that finds a delimiter with find and returns the
// text after it (after) or before it.
func splitAt(find func(s, sep string) int, after bool) func(*evalCtx, []value) value {
	return func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		sep, ok2 := argStr(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		i := find(s, sep)
		switch {
		case i < 0:
			return strV("")
		case after:
			return strV(s[i+len(sep):])
		default:
			return strV(s[:i])
		}
	}
}
