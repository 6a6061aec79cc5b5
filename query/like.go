package query

// likePattern is a compiled LIKE pattern.
type likePattern struct {
	src   string
	esc   rune
	parts []likePart
}

// likePart is one pattern element: a literal rune, _ (any one), % (any run)
// or a [...] character class.
type likePart struct {
	kind   byte // 'l' literal, '_' one, '%' many, '[' class
	r      rune
	negate bool
	ranges []rune // pairs lo,hi
}

func compileLike(p string, esc rune) *likePattern {
	lp := &likePattern{src: p, esc: esc}
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == esc && i+1 < len(rs):
			i++
			lp.parts = append(lp.parts, likePart{kind: 'l', r: rs[i]})
		case r == '%':
			lp.parts = append(lp.parts, likePart{kind: '%'})
		case r == '_':
			lp.parts = append(lp.parts, likePart{kind: '_'})
		case r == '[':
			end := -1
			for j := i + 1; j < len(rs); j++ {
				if rs[j] == ']' && j > i+1 {
					end = j
					break
				}
			}
			if end < 0 {
				lp.parts = append(lp.parts, likePart{kind: 'l', r: r})
				continue
			}
			part := likePart{kind: '['}
			body := rs[i+1 : end]
			if len(body) > 0 && body[0] == '^' {
				part.negate = true
				body = body[1:]
			}
			for k := 0; k < len(body); k++ {
				if k+2 < len(body) && body[k+1] == '-' {
					part.ranges = append(part.ranges, body[k], body[k+2])
					k += 2
				} else {
					part.ranges = append(part.ranges, body[k], body[k])
				}
			}
			lp.parts = append(lp.parts, part)
			i = end
		default:
			lp.parts = append(lp.parts, likePart{kind: 'l', r: r})
		}
	}
	return lp
}

func (p *likePart) matches(r rune) bool {
	switch p.kind {
	case 'l':
		return p.r == r
	case '_':
		return true
	case '[':
		in := false
		for i := 0; i+1 < len(p.ranges); i += 2 {
			if r >= p.ranges[i] && r <= p.ranges[i+1] {
				in = true
				break
			}
		}
		return in != p.negate
	}
	return false
}

// match reports whether s matches the whole pattern, using the classic
// backtracking-to-last-% algorithm (linear in practice, no recursion).
func (lp *likePattern) match(s string) bool {
	rs := []rune(s)
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(rs) {
		if pi < len(lp.parts) && lp.parts[pi].kind == '%' {
			starP, starS = pi, si
			pi++
			continue
		}
		if pi < len(lp.parts) && lp.parts[pi].matches(rs[si]) {
			pi++
			si++
			continue
		}
		if starP >= 0 {
			pi = starP + 1
			starS++
			si = starS
			continue
		}
		return false
	}
	for pi < len(lp.parts) && lp.parts[pi].kind == '%' {
		pi++
	}
	return pi == len(lp.parts)
}
