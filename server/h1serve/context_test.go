package h1serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

// ctxState is what can be seen of a context without waiting.
type ctxState struct {
	err       error
	cause     error
	done      bool // its Done channel is closed (looked at once asked for)
	value     any
	childDone bool // a context.WithCancel of it (made by the step) is done
	afterFunc bool // a context.AfterFunc on it (registered by the step) ran
}

// stateOf looks at ctx; at its Done channel only when probeDone (asking
// for it is a step of its own).
func stateOf(ctx context.Context, probeDone bool, child context.Context, ran *bool, mu *sync.Mutex) ctxState {
	s := ctxState{err: ctx.Err(), value: ctx.Value(ctxKey{})}
	if probeDone {
		select {
		case <-ctx.Done():
			s.done = true
		default:
		}
	}
	if errors.Is(s.err, context.Canceled) || s.err == nil {
		s.cause = context.Cause(ctx)
	}
	if child != nil {
		select {
		case <-child.Done():
			s.childDone = true
		default:
		}
	}
	mu.Lock()
	s.afterFunc = *ran
	mu.Unlock()
	return s
}

// TestARequestsContextAnswersAsContextWithCancelDoes: the request's context
// (made only when waited on) and context.WithCancel of the same parent,
// put through the same steps (the parent cancelled or not, before or after
// the request ends; Done asked for before, after or never; a child context
// and an AfterFunc made on it), show the same Err, Done, Value, derived
// contexts and Cause.
func TestARequestsContextAnswersAsContextWithCancelDoes(t *testing.T) {
	type step int
	const (
		look        step = iota // compare the two
		askDone                 // call Done
		derive                  // make a context.WithCancel of it and a context.AfterFunc on it
		end                     // the handler returns
		cancelConn              // the connection's context is cancelled
		timeoutConn             // the connection's context has passed its deadline
	)
	names := []string{"look", "askDone", "derive", "end", "cancelConn", "timeoutConn"}
	plans := [][]step{
		{look, end, look},
		{askDone, look, end, look},
		{look, end, askDone, look},
		{derive, look, end, look},
		{look, end, derive, look},
		{look, cancelConn, look, end, look},
		{askDone, cancelConn, look, end, look},
		{derive, cancelConn, look, end, look},
		{look, end, cancelConn, look, askDone, look},
		{look, timeoutConn, look, end, look},
		{askDone, timeoutConn, look, end, look},
		{look, end, timeoutConn, look},
		{cancelConn, derive, look, end, look},
	}
	for _, plan := range plans {
		var desc []string
		for _, s := range plan {
			desc = append(desc, names[s])
		}
		t.Run(strings.Join(desc, ","), func(t *testing.T) {
			base := context.WithValue(context.Background(), ctxKey{}, "v")
			var parent context.Context
			var cancelParent context.CancelFunc
			timeout := false
			for _, s := range plan {
				timeout = timeout || s == timeoutConn
			}
			var release func()
			if timeout {
				var dl context.Context
				gate := make(chan struct{})
				release = func() { close(gate) }
				// A deadline that passes when the step says so.
				dl, cancelParent = context.WithTimeout(base, time.Hour)
				parent = &gatedDeadline{Context: dl, gate: gate}
			} else {
				parent, cancelParent = context.WithCancel(base)
			}
			defer cancelParent()

			var ours requestContext
			ours.init(parent)
			ref, refCancel := context.WithCancel(parent)
			defer refCancel()

			var mu sync.Mutex
			var oursChild, refChild context.Context
			var oursRan, refRan bool
			waited := false
			for i, s := range plan {
				switch s {
				case askDone:
					ours.Done()
					ref.Done()
					waited = true
				case derive:
					var c1, c2 context.CancelFunc
					oursChild, c1 = context.WithCancel(&ours)
					refChild, c2 = context.WithCancel(ref)
					defer c1()
					defer c2()
					context.AfterFunc(&ours, func() { mu.Lock(); oursRan = true; mu.Unlock() })
					context.AfterFunc(ref, func() { mu.Lock(); refRan = true; mu.Unlock() })
					waited = true
				case end:
					ours.end()
					refCancel()
				case cancelConn:
					cancelParent()
				case timeoutConn:
					release()
				case look:
					// AfterFunc runs on its own goroutine: give both a
					// moment when one is expected to have run.
					deadline := time.Now().Add(5 * time.Second)
					for {
						a := stateOf(&ours, waited, oursChild, &oursRan, &mu)
						b := stateOf(ref, waited, refChild, &refRan, &mu)
						if a == b {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("step %d: the request's context %+v, context.WithCancel's %+v", i, a, b)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
		})
	}
}

// gatedDeadline is a context that reports DeadlineExceeded once its gate
// is closed.
type gatedDeadline struct {
	context.Context
	gate chan struct{}
	once sync.Once
	done chan struct{}
}

func (g *gatedDeadline) ch() chan struct{} {
	g.once.Do(func() {
		g.done = make(chan struct{})
		go func() { <-g.gate; close(g.done) }()
	})
	return g.done
}

func (g *gatedDeadline) Done() <-chan struct{} { return g.ch() }

func (g *gatedDeadline) Err() error {
	select {
	case <-g.ch():
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestARequestsContextIsCancelledWhenItsHandlerReturnsAsWithNetHTTP: a
// context a handler keeps past its return is cancelled, whether or not
// the handler waited on it or derived one from it, on both servers.
func TestARequestsContextIsCancelledWhenItsHandlerReturnsAsWithNetHTTP(t *testing.T) {
	type kept struct {
		ctx, child context.Context
	}
	got := make(chan kept, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var k kept
		k.ctx = r.Context()
		switch r.URL.Path {
		case "/wait":
			select {
			case <-r.Context().Done():
			default:
			}
		case "/derive":
			var cancel context.CancelFunc
			k.child, cancel = context.WithTimeout(r.Context(), time.Hour)
			defer func() { go func() { <-k.child.Done(); cancel() }() }()
		}
		if err := r.Context().Err(); err != nil {
			http.Error(w, err.Error(), 500)
		}
		got <- k
	})
	std, ours := servers(t, h, nil)
	for _, addr := range []string{std, ours} {
		for _, path := range []string{"/plain", "/wait", "/derive"} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s%s: status %d during the request", addr, path, resp.StatusCode)
			}
			k := <-got
			for _, c := range []context.Context{k.ctx, k.child} {
				if c == nil {
					continue
				}
				select {
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s%s: a context kept past the handler's return is not cancelled", addr, path)
				}
				if !errors.Is(c.Err(), context.Canceled) {
					t.Errorf("%s%s: Err %v after the handler returned", addr, path, c.Err())
				}
			}
		}
	}
}
