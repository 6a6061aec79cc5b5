package vector

// scratch is one search's working memory, pooled per index: a visited
// stamp per node (a generation counter saves clearing it) and the beam.
type scratch struct {
	stamp []uint32
	gen   uint32
	todo  []candidate
	best  []candidate
}

func (ix *Index) getScratch() *scratch {
	if s, ok := ix.scratch.Get().(*scratch); ok {
		return s
	}
	return &scratch{}
}

func (ix *Index) putScratch(s *scratch) { ix.scratch.Put(s) }

// reset starts a search over n nodes.
func (s *scratch) reset(n int) {
	if len(s.stamp) < n {
		s.stamp = make([]uint32, n+n/4+64)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear
		clear(s.stamp)
		s.gen = 1
	}
}

// visit marks node id visited; it reports whether it was not already.
func (s *scratch) visit(id uint32) bool {
	if s.stamp[id] == s.gen {
		return false
	}
	s.stamp[id] = s.gen
	return true
}
