package main

import (
	"sync"
)

// runStore keeps the latest scenario results so that a page can show a
// result after the POST that produced it redirected (post/redirect/get).
type runStore struct {
	mu    sync.Mutex
	limit int
	order []string
	byID  map[string]any
}

// newRunStore keeps the last limit results.
func newRunStore(limit int) *runStore {
	return &runStore{limit: limit, byID: map[string]any{}}
}

// put stores a result and returns its id.
func (r *runStore) put(v any) string {
	id := newID("run")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[id] = v
	r.order = append(r.order, id)
	if len(r.order) > r.limit {
		delete(r.byID, r.order[0])
		r.order = r.order[1:]
	}
	return id
}

// get returns a stored result.
func (r *runStore) get(id string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.byID[id]
	return v, ok
}
