package query

// Admits reports whether a document passes the query's WHERE clause: whether
// at least one of its rows (one per combination of JOINed elements) does. It
// projects nothing, applies no ORDER BY, TOP or aggregate, and is not counted
// by Matched. An index search calls it as its filter, during the search, so
// that a top-k drawn from the index holds only documents the query can return.
// A query whose FROM is a subquery, or that has none, admits every document.
func (x *Execution) Admits(doc []byte) (bool, error) {
	sq := x.q.q
	if sq.where == nil || len(sq.from) == 0 || sq.from[0].sub != nil {
		return true, nil
	}
	v, err := decodeDocument(doc, x.q.fields, x.q.keepRaw)
	if err != nil {
		return false, errBadDocument
	}
	c := x.c
	c.matched = nil
	c.startRun()
	defer c.mem.release()
	e := &env{vals: make([]value, sq.nslots), root: v}
	found := false
	sq.rows(&c, e, 0, func() bool {
		found = true
		return false
	})
	if c.err != nil {
		return false, c.err
	}
	return found, nil
}
