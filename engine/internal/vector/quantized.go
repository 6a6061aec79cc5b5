package vector

// forQuantizer is v as the quantizer sees it: unit length for cosine.
func (ix *Index) forQuantizer(v []float32) []float32 {
	if ix.cfg.Metric == Cosine {
		return normalized(v)
	}
	return v
}

// train fits a quantizedFlat index's product quantizer to the vectors it
// holds, codes them all and from then on keeps only codes in memory: the
// exact vectors stay in the keyspace, read back to re-rank.
func (p *Pending) train() error {
	ix := p.ix
	var sample [][]float32
	var ids []uint32
	for id, k := range ix.keys {
		if k != nil {
			sample = append(sample, ix.vec(uint32(id)))
			ids = append(ids, uint32(id))
		}
	}
	q := trainQuantizer(sample, ix.dim, ix.cfg.QuantizationByteSize, ix.cfg.Metric != Euclidean, uint64(len(sample)))
	codes := make([]byte, int(ix.m.nextID)*q.m)
	for i, id := range ids {
		code := q.encode(sample[i], codes[int(id)*q.m:int(id)*q.m])
		if err := p.w.Set(idKey(recCode, id), code); err != nil {
			return err
		}
	}
	if err := p.w.Set([]byte{recCodebook}, q.encodeBinary()); err != nil {
		return err
	}
	vecs := ix.vecs
	ix.pq, ix.codes, ix.vecs = q, codes, nil
	p.undo = append(p.undo, func() { ix.pq, ix.codes, ix.vecs = nil, nil, vecs })
	return nil
}
