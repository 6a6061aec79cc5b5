package vector

import (
	"slices"
	"sort"
)

// A node takes back edges past MaxDegree up to 1.3 times it (DiskANN's
// slack) before it is pruned back to MaxDegree, which spreads the cost of
// pruning over several inserts.

// alpha2 is Vamana's pruning factor α = 1.2, squared because the distances
// the graph compares are squared ones (L2², or 1 - cos = L2²/2 for unit
// vectors).
const alpha2 = 1.44

// consolidateBudget is how many nodes one Pending repairs, at most, while
// deleted nodes wait to be unlinked: consolidation is spread over the
// writes that follow deletes instead of stopping one of them for a pass over
// the whole graph.
const consolidateBudget = 64

// nodeDist is the distance between two nodes the graph is built on: L2²,
// which for cosine's unit vectors is 2(1 - cos).
func (ix *Index) nodeDist(a, b uint32) float32 { return l2sq(ix.vec(a), ix.vec(b)) }

// candidate is a node and its distance to the point searched.
type candidate struct {
	d        float32
	id       uint32
	expanded bool
}

// link inserts node id into the graph (Vamana's insert): a greedy search
// from the entry node gathers the nodes it expands, their robust pruning
// gives id's out-neighbours, and each of those gets a back edge, pruned in
// turn when it overflows.
func (p *Pending) link(id uint32) {
	ix := p.ix
	if !ix.m.hasEntry {
		p.setMeta(func(m *meta) { m.entry, m.hasEntry = id, true })
		p.setEdges(id, []uint32{})
		return
	}
	s := ix.getScratch()
	defer ix.putScratch(s)
	v := ix.vec(id)
	visited := ix.walk(s, v, ix.cfg.SearchListSize, true, func(c uint32) float32 { return l2sq(v, ix.vec(c)) })
	pool := make([]candidate, 0, len(visited))
	for _, c := range visited {
		if c.id != id && ix.usable(c.id) {
			pool = append(pool, candidate{d: c.d, id: c.id})
		}
	}
	out := ix.prune(id, pool)
	p.setEdges(id, out)
	R := ix.cfg.MaxDegree
	slack := R + R*3/10
	for _, n := range out {
		cur := ix.nbrs[n]
		if slices.Contains(cur, id) {
			continue
		}
		if len(cur) < slack {
			next := make([]uint32, len(cur), len(cur)+1)
			copy(next, cur)
			p.setEdges(n, append(next, id))
			continue
		}
		cands := make([]candidate, 0, len(cur)+1)
		for _, c := range append(slices.Clone(cur), id) {
			if ix.usable(c) {
				cands = append(cands, candidate{d: ix.nodeDist(n, c), id: c})
			}
		}
		p.setEdges(n, ix.prune(n, cands))
	}
}

// usable reports whether node id holds a live item (not deleted, not free).
func (ix *Index) usable(id uint32) bool { return ix.keys[id] != nil && !ix.isDead(id) }

func (ix *Index) isDead(id uint32) bool {
	if len(ix.dead) == 0 {
		return false
	}
	_, d := ix.dead[id]
	return d
}

// prune is Vamana's RobustPrune: from the candidates (distances to p), it
// keeps the closest, drops every candidate that the kept one covers (α
// times closer to it than to p), and repeats, up to MaxDegree nodes.
func (ix *Index) prune(p uint32, cands []candidate) []uint32 {
	sort.Slice(cands, func(i, j int) bool { return cands[i].d < cands[j].d })
	R := ix.cfg.MaxDegree
	out := make([]uint32, 0, R)
	removed := make([]bool, len(cands))
	for i := range cands {
		if removed[i] {
			continue
		}
		c := cands[i]
		if c.id == p || slices.Contains(out, c.id) {
			continue
		}
		out = append(out, c.id)
		if len(out) == R {
			break
		}
		cv := ix.vec(c.id)
		for j := i + 1; j < len(cands); j++ {
			if !removed[j] && alpha2*l2sq(cv, ix.vec(cands[j].id)) <= cands[j].d {
				removed[j] = true
			}
		}
	}
	return out
}

// walk is the greedy beam search (Vamana's GreedySearch, in the two-heap
// form of HNSW's layer search): from the closest landmarks it expands the
// closest node not yet expanded, keeping the L closest nodes seen, until
// the closest unexpanded node is farther than the L-th closest seen. It
// returns the nodes expanded, closest first when expandedOnly (an insert's
// candidates), else nil: a search collects what it needs through dist,
// which measures a node against the point searched.
func (ix *Index) walk(s *scratch, q []float32, L int, expandedOnly bool, dist func(uint32) float32) []candidate {
	s.reset(int(ix.m.nextID))
	todo := minHeap(s.todo[:0])
	best := maxHeap(s.best[:0])
	var expanded []candidate
	// Start from the closest landmarks: a sample of the nodes spread over
	// the graph, which lets a walk reach a region that no path of short
	// edges leads to from one entry node (the role HNSW's upper layers
	// play).
	// Every landmark measured is a candidate to expand: one marked visited
	// but left out of the beam would never be expanded, and the nodes only
	// it links to never reached (with a little over landmarkCount nodes,
	// nearly all of them are landmarks).
	for _, id := range ix.landmarks(landmarkCount) {
		if !s.visit(id) {
			continue
		}
		c := candidate{d: dist(id), id: id}
		todo.push(c)
		best.push(c, L)
	}
	for len(todo) > 0 {
		cur := todo.pop()
		if len(best) == L && cur.d > best[0].d {
			break
		}
		if expandedOnly {
			expanded = append(expanded, cur)
		}
		for _, n := range ix.nbrs[cur.id] {
			if !s.visit(n) {
				continue
			}
			d := dist(n)
			if len(best) < L || d < best[0].d {
				c := candidate{d: d, id: n}
				todo.push(c)
				best.push(c, L)
			}
		}
	}
	s.todo, s.best = todo[:0], best[:0]
	if expandedOnly {
		sort.Slice(expanded, func(i, j int) bool { return expanded[i].d < expanded[j].d })
	}
	return expanded
}

// minHeap is a binary heap of candidates, closest on top.
type minHeap []candidate

func (h *minHeap) push(c candidate) {
	*h = append(*h, c)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].d <= a[i].d {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() candidate {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].d < a[m].d {
			m = l
		}
		if r < n && a[r].d < a[m].d {
			m = r
		}
		if m == i {
			break
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
	*h = a
	return top
}

// maxHeap is a bounded binary heap of candidates, farthest on top.
type maxHeap []candidate

// push adds c, then drops the farthest while there are more than bound.
func (h *maxHeap) push(c candidate, bound int) {
	a := *h
	if len(a) == bound {
		if c.d >= a[0].d {
			return
		}
		a[0] = c
		siftDownMax(a)
		return
	}
	a = append(a, c)
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].d >= a[i].d {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
	*h = a
}

func siftDownMax(a []candidate) {
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].d > a[m].d {
			m = l
		}
		if r < len(a) && a[r].d > a[m].d {
			m = r
		}
		if m == i {
			return
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
}

// landmarkCount is how many landmarks a walk measures and starts from.
// At 100,000 vectors (the benchmark's data set, L = 10) 256 landmarks take
// recall@10 from 0.72 (the entry node alone) to 0.95 for 10% more distances.
const landmarkCount = 256

// landmarks returns up to n nodes spread evenly over the ids (so over the
// order of insertion): for each of n evenly spaced ids, the first usable one
// at or after it. The choice depends only on the index's state, so an index
// reopened from its keyspace starts its walks where the one that wrote it
// did. The entry node comes first.
func (ix *Index) landmarks(n int) []uint32 {
	out := make([]uint32, 0, n+1)
	if ix.m.hasEntry {
		out = append(out, ix.m.entry)
	}
	total := int(ix.m.nextID)
	if total <= n {
		for id := range total {
			if ix.usable(uint32(id)) {
				out = append(out, uint32(id))
			}
		}
		return out
	}
	for i := range n {
		for id := i * total / n; id < (i+1)*total/n; id++ {
			if ix.usable(uint32(id)) {
				out = append(out, uint32(id))
				break
			}
		}
	}
	return out
}

// consolidate repairs up to budget live nodes, from the sweep's cursor,
// that link to deleted ones: their edges become the robust pruning of their
// live neighbours and the live neighbours of their deleted ones
// (FreshDiskANN's delete consolidation). When the cursor passes the last
// node, a sweep ends: the nodes deleted before it began are unlinked from
// every node and are freed.
func (p *Pending) consolidate(budget int) error {
	ix := p.ix
	n := ix.m.nextID
	cursor := ix.m.cursor
	for budget > 0 && cursor < n {
		id := cursor
		cursor++
		if ix.keys[id] == nil || ix.isDead(id) {
			continue
		}
		nb := ix.nbrs[id]
		hasDead := false
		for _, x := range nb {
			if ix.isDead(x) {
				hasDead = true
				break
			}
		}
		if !hasDead {
			continue
		}
		budget--
		seen := map[uint32]bool{id: true}
		var cands []candidate
		add := func(c uint32) {
			if !seen[c] && !ix.isDead(c) && ix.keys[c] != nil {
				seen[c] = true
				cands = append(cands, candidate{d: ix.nodeDist(id, c), id: c})
			}
		}
		for _, x := range nb {
			if ix.isDead(x) {
				for _, y := range ix.nbrs[x] {
					add(y)
				}
			} else {
				add(x)
			}
		}
		p.setEdges(id, ix.prune(id, cands))
	}
	if cursor < n {
		p.setMeta(func(m *meta) { m.cursor = cursor })
		return nil
	}
	// A sweep ended: free the nodes deleted before it began, which no live
	// node links to any more. Those deleted during it wait for the next.
	epoch := ix.m.epoch
	var freed []uint32
	for id, e := range ix.dead {
		if e < epoch {
			freed = append(freed, id)
		}
	}
	slices.Sort(freed)
	for _, id := range freed {
		delete(ix.dead, id)
		p.undo = append(p.undo, func() { ix.dead[id] = epoch - 1 })
		p.setEdges(id, nil)
		delete(p.touched, id)
		if err := p.freeID(id); err != nil {
			return err
		}
	}
	entry, hasEntry := ix.m.entry, ix.m.hasEntry
	if hasEntry && ix.keys[entry] == nil {
		entry, hasEntry = ix.newEntry()
	}
	p.setMeta(func(m *meta) {
		m.cursor, m.epoch = 0, epoch+1
		m.entry, m.hasEntry = entry, hasEntry
	})
	return nil
}

// newEntry picks a node to start searches from once the entry was freed:
// the lowest live id (any node reaches the graph).
func (ix *Index) newEntry() (uint32, bool) {
	for id := range ix.keys {
		if ix.usable(uint32(id)) {
			return uint32(id), true
		}
	}
	return 0, false
}
