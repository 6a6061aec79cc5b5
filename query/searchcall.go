package query

import "strings"

// searchKind is a vector, full-text or hybrid search function.
type searchKind uint8

const (
	skVectorDistance searchKind = iota + 1 // VectorDistance(a, b [, bruteForce [, options]])
	skVectorScore                          // _VectorScore(path, vector [, options]): the gateway's rewrite
	skContains                             // FullTextContains(path, keyword)
	skContainsAll                          // FullTextContainsAll(path, keyword, ...)
	skContainsAny                          // FullTextContainsAny(path, keyword, ...)
	skScore                                // FullTextScore(path, keyword, ...): ORDER BY RANK only
	skScoreWithStats                       // _FullTextScore(path, [keywords], documents, words, [hits])
	skWordCount                            // _FullTextWordCount(path)
	skRRF                                  // RRF(component, ... [, weights]): ORDER BY RANK only
)

// searchFunctions maps the upper-case names to their kinds and the names
// as the service spells them (for plans and messages).
var searchFunctions = map[string]struct {
	kind             searchKind
	name             string
	minArgs, maxArgs int
}{
	"VECTORDISTANCE":      {skVectorDistance, "VectorDistance", 2, 4},
	"_VECTORSCORE":        {skVectorScore, "_VectorScore", 2, 3},
	"FULLTEXTCONTAINS":    {skContains, "FullTextContains", 2, 2},
	"FULLTEXTCONTAINSALL": {skContainsAll, "FullTextContainsAll", 2, -1},
	"FULLTEXTCONTAINSANY": {skContainsAny, "FullTextContainsAny", 2, -1},
	"FULLTEXTSCORE":       {skScore, "FullTextScore", 2, -1},
	"_FULLTEXTSCORE":      {skScoreWithStats, "_FullTextScore", 5, 5},
	"_FULLTEXTWORDCOUNT":  {skWordCount, "_FullTextWordCount", 1, 1},
	"RRF":                 {skRRF, "RRF", 1, -1},
}

func init() {
	for upperName, f := range searchFunctions {
		builtins[upperName] = &builtin{name: f.name, minArgs: f.minArgs, maxArgs: f.maxArgs,
			fn: func(c *evalCtx, _ []value) value {
				return c.fail(runtimeError("%s is evaluated by its call.", f.name))
			}}
	}
}

// searchCall is what the binder learns of a search function's call.
type searchCall struct {
	kind searchKind
	name string
	// path is the document path of the text or vector argument (pathArg),
	// nil when that argument is not a property path of the container.
	path    []string
	pathArg int
	// metric and dataType come from VectorDistance's options argument (0
	// and "" when it names none); bruteForce from its third argument.
	metric     vectorMetric
	dataType   string
	bruteForce bool
	listMult   int
	// optsParam names the parameter that holds the options, when a
	// parameter does.
	optsParam string
	// components and weights are RRF's.
	components []*callExpr
	weights    []float64
}

// isSearchName reports whether a call names a search function.
func isSearchName(name string) bool {
	_, ok := searchFunctions[upper(name)]
	return ok
}

// searchCallOf returns the call's search information, or nil.
func searchCallOf(x expr) *searchCall {
	if c, ok := x.(*callExpr); ok && !c.udf {
		return c.search
	}
	return nil
}

// bindSearch checks a search function's arguments (they are bound) and
// fills in its searchCall. inRank is true for the expression of ORDER BY
// RANK and RRF's components.
func (b *binder) bindSearch(n *callExpr, s *scope, inRank bool) error {
	f := searchFunctions[upper(n.name)]
	sc := &searchCall{kind: f.kind, name: f.name}
	n.search = sc
	start, end := n.pos, n.pos+len(n.name)
	fail := func(format string, args ...any) error {
		return semanticError(CodeSemantic, start, end, format, args...)
	}
	var q *selectQuery
	if s != nil {
		q = s.q
	}
	pathOf := func(x expr) []string {
		if q == nil {
			return nil
		}
		p, _ := analyzer{q: q}.docPath(x)
		return p
	}
	switch f.kind {
	case skVectorDistance, skVectorScore:
		sc.path = pathOf(n.args[0])
		if sc.path == nil && len(n.args) > 1 {
			sc.path, sc.pathArg = pathOf(n.args[1]), 1
		}
		opts := 3
		if f.kind == skVectorScore {
			opts = 2
		}
		if f.kind == skVectorDistance && len(n.args) > 2 {
			c, ok := n.args[2].(*constExpr)
			if !ok || c.v.k != kBool {
				if _, param := n.args[2].(*paramExpr); !param {
					return fail("The third argument of VectorDistance (bruteForce) must be a boolean constant.")
				}
			} else {
				sc.bruteForce = c.v.b
			}
		}
		if len(n.args) > opts {
			if err := sc.bindVectorOptions(n.args[opts], fail); err != nil {
				return err
			}
		}
	case skContains, skContainsAll, skContainsAny, skScore, skWordCount, skScoreWithStats:
		sc.path = pathOf(n.args[0])
		if f.kind == skScore {
			if !inRank {
				return fail("The FullTextScore function is only allowed in an ORDER BY RANK clause, directly or as an argument of RRF.")
			}
			if sc.path == nil {
				return fail("The first argument of FullTextScore must be a property path of the container.")
			}
			for _, a := range n.args[1:] {
				if !isConstant(a) {
					return fail("The keywords of FullTextScore must be string constants or parameters.")
				}
			}
		}
	case skRRF:
		if !inRank {
			return fail("The RRF function is only allowed in an ORDER BY RANK clause.")
		}
		args := n.args
		if last, ok := args[len(args)-1].(*arrayExpr); ok {
			args = args[:len(args)-1]
			for _, w := range last.elems {
				c, ok := w.(*constExpr)
				if !ok || c.v.k != kNumber {
					return fail("The weights of RRF must be an array of numbers.")
				}
				sc.weights = append(sc.weights, c.v.n)
			}
		}
		if len(args) == 0 {
			return fail("The RRF function requires at least one FullTextScore or VectorDistance argument.")
		}
		if sc.weights != nil && len(sc.weights) != len(args) {
			return fail("The RRF function has %d scoring arguments but %d weights.", len(args), len(sc.weights))
		}
		for _, a := range args {
			c := searchCallOf(a)
			if c == nil || (c.kind != skScore && c.kind != skVectorDistance) {
				return fail("The arguments of RRF must be FullTextScore or VectorDistance calls, followed by an optional array of weights.")
			}
			sc.components = append(sc.components, a.(*callExpr))
		}
	}
	return nil
}

// bindVectorOptions reads VectorDistance's options object.
func (sc *searchCall) bindVectorOptions(x expr, fail func(string, ...any) error) error {
	o, ok := x.(*objectExpr)
	if !ok {
		if p, param := x.(*paramExpr); param {
			sc.optsParam = p.name // read when the parameter is known
			return nil
		}
		return fail("The options argument of %s must be an object.", sc.name)
	}
	for i, k := range o.keys {
		c, ok := o.vals[i].(*constExpr)
		switch strings.ToLower(k) {
		case "distancefunction":
			if !ok || c.v.k != kString {
				return fail("The distanceFunction option of %s must be a string.", sc.name)
			}
			m, ok := parseMetric(c.v.str())
			if !ok {
				return fail("The distanceFunction option of %s must be 'cosine', 'dotproduct' or 'euclidean', not '%s'.", sc.name, c.v.str())
			}
			sc.metric = m
		case "datatype":
			if !ok || c.v.k != kString {
				return fail("The dataType option of %s must be a string.", sc.name)
			}
			switch strings.ToLower(c.v.str()) {
			case "float32", "float16", "int8", "uint8":
				sc.dataType = strings.ToLower(c.v.str())
			default:
				return fail("The dataType option of %s must be 'float32', 'float16', 'int8' or 'uint8', not '%s'.", sc.name, c.v.str())
			}
		case "searchlistsizemultiplier":
			if !ok || c.v.k != kNumber || !isInteger(c.v.n) || c.v.n < 1 || c.v.n > 100 {
				return fail("The searchListSizeMultiplier option of %s must be an integer between 1 and 100.", sc.name)
			}
			sc.listMult = int(c.v.n)
		default:
			return fail("'%s' is not an option of %s: the options are distanceFunction, dataType and searchListSizeMultiplier.", k, sc.name)
		}
	}
	return nil
}

// metricFor is the distance function a vector call uses: its options', the
// policy's for its path, else cosine.
func (sc *searchCall) metricFor(c *evalCtx) vectorMetric {
	if sc.metric != 0 {
		return sc.metric
	}
	if sc.optsParam != "" {
		if o := c.params[sc.optsParam]; o.k == kObject {
			for i, k := range o.object().keys {
				if v := o.object().vals[i]; strings.EqualFold(k, "distanceFunction") && v.k == kString {
					if m, ok := parseMetric(v.str()); ok {
						return m
					}
				}
			}
		}
	}
	if c.search != nil && sc.path != nil {
		if emb, ok := c.search.Embedding(sc.path); ok {
			if m, ok := parseMetric(emb.DistanceFunction); ok {
				return m
			}
		}
	}
	return metricCosine
}

// analyze cuts text at the call's path into terms.
func (sc *searchCall) analyze(c *evalCtx, text string) []Term {
	if c.search != nil {
		return c.search.Analyze(sc.path, text)
	}
	return DefaultAnalyze(text)
}

// keyword analyzes a keyword, once per run of the execution: keywords are
// mostly constants, analyzed again for every row otherwise.
func (sc *searchCall) keyword(c *evalCtx, kw string) []Term {
	k := keywordKey{sc, kw}
	if t, ok := c.keywords[k]; ok {
		return t
	}
	t := sc.analyze(c, kw)
	if c.keywords == nil {
		c.keywords = map[keywordKey][]Term{}
	}
	if len(c.keywords) < 1024 {
		c.keywords[k] = t
	}
	return t
}

// keywordKey names a keyword analyzed for a call.
type keywordKey struct {
	sc *searchCall
	kw string
}

// eval computes a search function of a row (RRF and FullTextScore are
// computed over all rows, in rank.go; evaluated alone they are undefined).
func (sc *searchCall) eval(c *evalCtx, args []value) value {
	switch sc.kind {
	case skVectorDistance, skVectorScore:
		s, ok := vectorScore(sc.metricFor(c), args[0], args[1])
		if !ok {
			return undef
		}
		return numV(s)
	case skContains, skContainsAll, skContainsAny:
		if args[0].k != kString {
			return undef
		}
		text := sc.analyze(c, args[0].str())
		any := false
		for _, kw := range args[1:] {
			if kw.k != kString {
				return undef
			}
			found := phraseCount(text, sc.keyword(c, kw.str())) > 0
			switch {
			case found && sc.kind != skContainsAll:
				return trueValue
			case !found && sc.kind != skContainsAny:
				return falseVal
			}
			any = any || found
		}
		return boolV(sc.kind == skContainsAll || any)
	case skWordCount:
		if args[0].k != kString {
			return undef
		}
		return numV(float64(len(sc.analyze(c, args[0].str()))))
	case skScoreWithStats:
		if args[0].k != kString || args[1].k != kArray || args[2].k != kNumber || args[3].k != kNumber || args[4].k != kArray {
			return undef
		}
		st := FullTextStats{Documents: int64(args[2].n), Words: int64(args[3].n)}
		for _, h := range args[4].array() {
			if h.k != kNumber {
				return undef
			}
			st.Hits = append(st.Hits, int64(h.n))
		}
		text := sc.analyze(c, args[0].str())
		var tf []int
		for _, kw := range args[1].array() {
			if kw.k != kString {
				return undef
			}
			tf = append(tf, phraseCount(text, sc.keyword(c, kw.str())))
		}
		return numV(bm25(tf, len(text), st))
	}
	return undef
}
