package searchindex

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// A vector index with a shard key (vectorIndexShardKey) is one index per
// value of the shard key's path: an item is in the index of its value (the
// items without one in the index of no value), and a query whose WHERE
// clause pins the shard key to values searches only their indexes. Each
// shard keeps its state under the vector index's prefix followed by its
// value (shardEncoding), and the shards of one index are found again by
// their prefixes when it is opened. The writers of the shards of one index
// take turns, as those of one unsharded index do: a transaction holds them
// all from its first item write to its commit, so an item moving from one
// shard to another moves in one step.

// shards is the shards of one vector index.
type shards struct {
	cfg  vector.Config
	segs []string // the shard key's path
	// space returns the keyspace of the shard whose encoded value ends
	// prefix.
	space func(prefix []byte) keyspace
	base  []byte // the vector index's prefix

	// writing serializes the transactions writing the shards.
	writing sync.Mutex
	mu      sync.RWMutex // guards byValue and of for the searches
	byValue map[string]*shard
	// of is the shard of every item the shards hold, by key (the writers'
	// alone: they hold writing).
	of map[string]string
}

// shard is one shard: the index of the items of one shard key value.
type shard struct {
	ix    *vector.Index
	space keyspace
}

// shardEncoding returns the encoded shard key value of raw (nil: none):
// the canonical JSON of the value, so that values equal as the query
// language compares them (1 and 1.0) share a shard, followed by a 0 byte,
// which no JSON text holds (a shard's prefix is no prefix of another's).
func shardEncoding(raw json.RawMessage) string {
	if raw == nil {
		return "\x00"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw) + "\x00"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw) + "\x00"
	}
	return string(b) + "\x00"
}

func newShards(cfg vector.Config, shardKey string, base []byte, space func([]byte) keyspace) *shards {
	return &shards{cfg: cfg, segs: pathSegments(shardKey), base: base, space: space,
		byValue: map[string]*shard{}, of: map[string]string{}}
}

func (s *shards) prefix(enc string) []byte {
	return append(bytes.Clone(s.base), enc...)
}

// load opens every shard kept in r (one keyspace per encoded value under
// the index's prefix).
func (s *shards) load(ctx context.Context, r storage.Reader) error {
	s.byValue, s.of = map[string]*shard{}, map[string]string{}
	lower := s.base
	for {
		it, err := r.NewIterator(ctx, lower, storage.PrefixEnd(s.base), false)
		if err != nil {
			return err
		}
		var enc string
		if it.Next() {
			rest := it.Key()[len(s.base):]
			if i := bytes.IndexByte(rest, 0); i >= 0 {
				enc = string(rest[:i+1])
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return err
		}
		if enc == "" {
			return nil
		}
		if _, err := s.open(ctx, enc, r); err != nil {
			return err
		}
		lower = storage.PrefixEnd(s.prefix(enc))
	}
}

// open opens the shard of enc from r and adds it.
func (s *shards) open(ctx context.Context, enc string, r storage.Reader) (*shard, error) {
	space := s.space(s.prefix(enc))
	ix, err := vector.Open(ctx, space.reader(r), s.cfg)
	if err != nil {
		return nil, err
	}
	sh := &shard{ix: ix, space: space}
	ix.Keys(func(key []byte) { s.of[string(key)] = enc })
	s.mu.Lock()
	s.byValue[enc] = sh
	s.mu.Unlock()
	return sh, nil
}

// search searches the shards of the encoded values encs (nil: every
// shard) as r has them, and returns the opt.K best results of all.
func (s *shards) search(ctx context.Context, q []float32, opt vector.SearchOptions, r storage.Reader, encs []string) ([]vector.Result, error) {
	s.mu.RLock()
	var list []*shard
	if encs == nil {
		for _, sh := range s.byValue {
			list = append(list, sh)
		}
	} else {
		for _, enc := range encs {
			if sh := s.byValue[enc]; sh != nil {
				list = append(list, sh)
			}
		}
	}
	s.mu.RUnlock()
	var out []vector.Result
	for _, sh := range list {
		o := opt
		o.Reader = sh.space.reader(r)
		found, err := sh.ix.Search(ctx, q, o)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	higher := s.cfg.Metric.HigherIsCloser()
	slices.SortStableFunc(out, func(a, b vector.Result) int {
		switch {
		case a.Score == b.Score:
			return bytes.Compare(a.Key, b.Key)
		case (a.Score > b.Score) == higher:
			return -1
		default:
			return 1
		}
	})
	if len(out) > opt.K {
		out = out[:opt.K]
	}
	return out, nil
}

// len returns how many items the shards hold.
func (s *shards) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, sh := range s.byValue {
		n += sh.ix.Len()
	}
	return n
}

// shardTxn is a transaction's pending changes to the shards: each shard is
// prepared when the transaction first changes it, and the shard of each
// item it moves is noted apart until it commits.
type shardTxn struct {
	s       *shards
	w       vector.Writer
	pending map[string]*vector.Pending
	order   []string // the shards of pending, as prepared
	of      map[string]string
	done    bool
}

// begin takes the shards' turn (the caller's transaction writes them next).
func (s *shards) begin(w vector.Writer) *shardTxn {
	s.writing.Lock()
	return &shardTxn{s: s, w: w, pending: map[string]*vector.Pending{}, of: map[string]string{}}
}

// prepared returns the pending changes of the shard of enc, opening an
// empty shard for a value none holds yet.
func (t *shardTxn) prepared(enc string) (*vector.Pending, error) {
	if p := t.pending[enc]; p != nil {
		return p, nil
	}
	t.s.mu.RLock()
	sh := t.s.byValue[enc]
	t.s.mu.RUnlock()
	if sh == nil {
		var err error
		if sh, err = t.s.open(context.Background(), enc, emptyReader{}); err != nil {
			return nil, err
		}
	}
	p, err := sh.ix.Prepare(sh.space.writer(t.w))
	if err != nil {
		return nil, err
	}
	t.pending[enc] = p
	t.order = append(t.order, enc)
	return p, nil
}

// add changes the item of key: its vector v (nil: none) in the shard of
// enc, and out of the shard it was in, if another.
func (t *shardTxn) add(key []byte, v []float32, enc string) error {
	was, noted := t.of[string(key)]
	if !noted {
		was = t.s.of[string(key)]
	}
	if was != "" && (was != enc || v == nil) {
		p, err := t.prepared(was)
		if err != nil {
			return err
		}
		if err := p.Add(vector.Change{Key: key}); err != nil {
			return err
		}
		t.of[string(key)] = ""
	}
	if v == nil {
		return nil
	}
	p, err := t.prepared(enc)
	if err != nil {
		return err
	}
	if err := p.Add(vector.Change{Key: key, Vector: v}); err != nil {
		return err
	}
	t.of[string(key)] = enc
	return nil
}

func (t *shardTxn) commit() {
	if t == nil || t.done {
		return
	}
	t.done = true
	for _, enc := range t.order {
		t.pending[enc].Commit()
	}
	for k, enc := range t.of {
		if enc == "" {
			delete(t.s.of, k)
		} else {
			t.s.of[k] = enc
		}
	}
	t.s.writing.Unlock()
}

func (t *shardTxn) abort() {
	if t == nil || t.done {
		return
	}
	t.done = true
	for i := len(t.order) - 1; i >= 0; i-- {
		t.pending[t.order[i]].Abort()
	}
	t.s.writing.Unlock()
}
