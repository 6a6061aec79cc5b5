package engine

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// Limits of the cursor cache: how many evaluated queries it keeps, how many
// bytes of results in all, and how long an unused one stays.
const (
	maxCursors      = 128
	maxCursorBytes  = 64 << 20
	cursorIdleLimit = 5 * time.Minute
)

// cursorCache keeps the complete results of queries evaluated whole (ORDER
// BY, aggregates, GROUP BY, DISTINCT) while a client pages through them, so
// that each further page is a slice of the results the first page computed
// instead of a new evaluation of the whole query. A page whose cursor is gone
// (evicted, expired, another process) evaluates the query again and resumes
// at the token's position, as without the cache. It is safe for concurrent
// use.
type cursorCache struct {
	mu      sync.Mutex
	byID    map[string]*list.Element // of *cursor
	lru     list.List                // most recently used first
	bytes   int
	now     func() time.Time
	maxLen  int
	maxSize int
}

// cursor is one query's evaluated results.
type cursor struct {
	id          string
	fingerprint string // what was evaluated: container, scope, query, parameters
	results     []json.RawMessage
	size        int
	used        time.Time
}

func newCursorCache(now func() time.Time) *cursorCache {
	return &cursorCache{byID: map[string]*list.Element{}, now: now, maxLen: maxCursors, maxSize: maxCursorBytes}
}

// get returns the results of cursor id if it holds the query fingerprint
// names.
func (cc *cursorCache) get(id, fingerprint string) ([]json.RawMessage, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	el, ok := cc.byID[id]
	if !ok {
		return nil, false
	}
	cur := el.Value.(*cursor)
	if cur.fingerprint != fingerprint || cc.now().Sub(cur.used) > cursorIdleLimit {
		return nil, false
	}
	cur.used = cc.now()
	cc.lru.MoveToFront(el)
	return cur.results, true
}

// put keeps results under a new cursor id and returns it; "" when they are
// too large to keep.
func (cc *cursorCache) put(fingerprint string, results []json.RawMessage) string {
	size := len(fingerprint) + 64
	for _, r := range results {
		size += len(r) + 24
	}
	if size > cc.maxSize/4 {
		return ""
	}
	var b [16]byte
	rand.Read(b[:])
	cur := &cursor{id: hex.EncodeToString(b[:]), fingerprint: fingerprint, results: results, size: size}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cur.used = cc.now()
	cc.byID[cur.id] = cc.lru.PushFront(cur)
	cc.bytes += size
	for cc.lru.Len() > cc.maxLen || cc.bytes > cc.maxSize {
		cc.removeLocked(cc.lru.Back())
	}
	for el := cc.lru.Back(); el != nil && cc.now().Sub(el.Value.(*cursor).used) > cursorIdleLimit; el = cc.lru.Back() {
		cc.removeLocked(el)
	}
	return cur.id
}

// drop forgets cursor id: its last page was read.
func (cc *cursorCache) drop(id string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if el, ok := cc.byID[id]; ok {
		cc.removeLocked(el)
	}
}

func (cc *cursorCache) removeLocked(el *list.Element) {
	cur := el.Value.(*cursor)
	cc.lru.Remove(el)
	delete(cc.byID, cur.id)
	cc.bytes -= cur.size
}

// len reports how many cursors are kept.
func (cc *cursorCache) len() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.lru.Len()
}
