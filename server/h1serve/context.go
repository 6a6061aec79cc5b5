package h1serve

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// requestContext is a request's context: the connection's context,
// cancelled when the request's handler has returned, as net/http's
// context.WithCancel of the connection's context is. It lives in the
// response's allocation and makes that child context only when something
// asks for its Done channel (a select on it, a context derived from it
// with a cancellation of its own, context.AfterFunc): a request whose
// handler never waits on its context costs no context of its own (two
// allocations). Until then, Err and Value answer as the child would.
type requestContext struct {
	parent context.Context // the connection's

	mu sync.Mutex
	// made is set, under mu, once child and cancel are: read without mu,
	// it publishes them.
	made   atomic.Bool
	child  context.Context
	cancel context.CancelFunc
	// ended is set, under mu, when the request's handler has returned;
	// endErr is then the child's Err as it would have been (the parent's
	// when it was cancelled first, else context.Canceled).
	ended  bool
	endErr error
}

func (c *requestContext) init(parent context.Context) { c.parent = parent }

func (c *requestContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *requestContext) Done() <-chan struct{} {
	if c.made.Load() {
		return c.child.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.made.Load() {
		c.child, c.cancel = context.WithCancel(c.parent)
		if c.ended {
			c.cancel()
		}
		c.made.Store(true)
	}
	return c.child.Done()
}

func (c *requestContext) Err() error {
	if c.made.Load() {
		return c.child.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.made.Load():
		return c.child.Err()
	case c.ended:
		return c.endErr
	}
	return c.parent.Err()
}

// Value is the child's once made (context.WithCancel of this context then
// finds the child's cancellation and joins it, as it would join the
// child's), the parent's until then.
func (c *requestContext) Value(key any) any {
	if c.made.Load() {
		return c.child.Value(key)
	}
	return c.parent.Value(key)
}

// end cancels the context: the request's handler has returned (or the
// connection is closing under it).
func (c *requestContext) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	if c.made.Load() {
		c.cancel()
		return
	}
	if c.endErr = c.parent.Err(); c.endErr == nil {
		c.endErr = context.Canceled
	}
}
