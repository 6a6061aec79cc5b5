package query

import (
	"encoding/json"
	"time"
)

// Condition is a parsed patch filter predicate such as
// "FROM c WHERE c.status = 'open'". It is safe for concurrent use.
type Condition struct {
	text   string
	q      *selectQuery
	fields map[string]bool // top-level properties read; nil for all
}

// ParseCondition parses a predicate of the form
// "FROM <source> [JOIN ...] [WHERE <expr>]" (a leading "SELECT *" is also
// accepted). Errors are *Error values.
func ParseCondition(text string) (*Condition, error) {
	p := &parser{toks: lex(text)}
	if p.acceptKw("SELECT") {
		if err := p.expectPunct("*"); err != nil {
			return nil, err
		}
	}
	if err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	sq := &selectQuery{isValue: true, items: []selectItem{{x: &constExpr{trueValue}}}}
	for {
		src, err := p.parseFromSource()
		if err != nil {
			return nil, err
		}
		sq.from = append(sq.from, src)
		if !p.acceptKw("JOIN") {
			break
		}
	}
	if p.acceptKw("WHERE") {
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		sq.where = x
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, syntaxErrorAt(t)
	}
	if err := (&binder{}).bindQuery(sq, nil, true); err != nil {
		return nil, err
	}
	fields, _ := rootFields(sq)
	return &Condition{text: text, q: sq, fields: fields}, nil
}

// String returns the predicate text as given to ParseCondition.
func (c *Condition) String() string { return c.text }

// Matches reports whether doc satisfies the predicate (for some binding of
// its JOINs). An undefined or non-boolean WHERE result does not match.
func (c *Condition) Matches(doc []byte, params map[string]json.RawMessage) (bool, error) {
	pv, err := decodeParams(params)
	if err != nil {
		return false, err
	}
	v, err := decodeDocument(doc, c.fields, false)
	if err != nil {
		return false, errBadDocument
	}
	ctx := &evalCtx{params: pv, now: time.Now().UTC()}
	e := &env{vals: make([]value, c.q.nslots), root: v}
	matched := false
	c.q.rows(ctx, e, 0, func() bool { matched = true; return false })
	if ctx.err != nil {
		return false, ctx.err
	}
	return matched, nil
}
