package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/orrery-db/orrery/engine"
)

// Limits bound what clients can make the server wait for and hold. Zero
// fields take the defaults below.
type Limits struct {
	// HeaderTimeout is how long a client may take to send a request's
	// headers, from its first byte; default 30 s. A request still sending
	// them is answered 408 and disconnected (on Server.Listener; elsewhere
	// http.Server.ReadHeaderTimeout cuts it a little later).
	HeaderTimeout time.Duration
	// BodyTimeout is how long a client may take to send a whole request,
	// headers and body, counted from its first byte
	// (http.Server.ReadTimeout); default 60 s, so the largest body (8 MiB)
	// must come at 140 KB/s at least. A client still sending when it ends is
	// answered 408 and disconnected.
	BodyTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to
	// the end of its response (http.Server.WriteTimeout), so a client that
	// never reads its response cannot pin it; default 2 min.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next
	// request (http.Server.IdleTimeout); default 2 min, longer than the
	// 90 s after which Go's and Node's HTTP clients drop idle connections.
	IdleTimeout time.Duration
	// BodyMemory caps the bytes all request bodies being read or served may
	// hold together; default 64 MiB, at least 16 MiB. A request takes its
	// Content-Length (a chunked one, what it has read so far) from this
	// budget before it reads and gives it back when it has been answered. A
	// quarter is kept for bodies of at most 256 KiB (the common item
	// writes and queries), so a flood of large uploads cannot make them wait.
	BodyMemory int64
	// BodyMemoryWait is how long a request waits for its share of
	// BodyMemory before it is answered 429 (substatus 3092, with
	// x-ms-retry-after-ms: the SDKs back off and retry, as from a service
	// under pressure); default 1 s.
	BodyMemoryWait time.Duration
}

// Default limits; see Limits.
const (
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultBodyTimeout    = 60 * time.Second
	DefaultWriteTimeout   = 2 * time.Minute
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultBodyMemory     = 64 << 20
	DefaultBodyMemoryWait = time.Second
)

// maxRequestBytes bounds a request body. Items and batches are limited to
// 2 MB by the engine (413); past this the request is refused by its
// Content-Length before any of it is read.
const maxRequestBytes = 8 << 20

// subStatusSystemResourceUnavailable is the service's substatus of a 429
// that is not about provisioned throughput: the node is short of a resource.
const subStatusSystemResourceUnavailable = 3092

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&l.HeaderTimeout, DefaultHeaderTimeout)
	def(&l.BodyTimeout, DefaultBodyTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.BodyMemoryWait, DefaultBodyMemoryWait)
	if l.BodyMemory == 0 {
		l.BodyMemory = DefaultBodyMemory
	}
	if l.BodyMemory < 2*maxRequestBytes {
		// The largest body allowed must fit beside the small bodies' share,
		// or it could never be served.
		l.BodyMemory = 2 * maxRequestBytes
	}
	return l
}

// HTTPServer returns an http.Server that serves s with its limits' timeouts.
// The binary and orrerytest both serve through it; the caller may set
// TLSConfig or a BaseContext before serving.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler: s,
		// Served on Server.Listener, the connections answer late headers
		// 408 at HeaderTimeout; this is the backstop for other listeners.
		ReadHeaderTimeout: s.limits.HeaderTimeout + headerGrace,
		ConnContext:       headerConnContext,
		ConnState:         headerConnState,
		ReadTimeout:       s.limits.BodyTimeout,
		WriteTimeout:      s.limits.WriteTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// bodyHold is the share of Limits.BodyMemory a request's body holds.
type bodyHold struct {
	budget *semaphore.Weighted
	n      int64
}

// release gives the share back.
func (h *bodyHold) release() {
	if h.n > 0 {
		h.budget.Release(h.n)
		h.n = 0
	}
}

// readBody reads a request's body within the body memory budget. It refuses
// a Content-Length over maxRequestBytes before reading anything. The caller
// calls hold.release once the request has been answered, also after an
// error.
func (s *Server) readBody(r *http.Request, hold *bodyHold) (body []byte, err error) {
	// A body known to be small draws on the small bodies' share; others,
	// chunked ones included, on the rest.
	hold.budget = s.bodyMem
	if r.ContentLength >= 0 && r.ContentLength <= smallBody {
		hold.budget = s.smallBodyMem
	}
	take := func(n int64) error {
		if !hold.budget.TryAcquire(n) {
			ctx, cancel := context.WithTimeout(r.Context(), s.limits.BodyMemoryWait)
			defer cancel()
			if err := hold.budget.Acquire(ctx, n); err != nil {
				if r.Context().Err() != nil {
					return &engine.Error{Status: http.StatusRequestTimeout, Code: "RequestTimeout", Message: "The request was cancelled while waiting to be read."}
				}
				return &engine.Error{Status: http.StatusTooManyRequests, SubStatus: subStatusSystemResourceUnavailable, Code: "TooManyRequests",
					Message: fmt.Sprintf("The server is reading too many request bodies at once (%d bytes in all); retry later.", s.limits.BodyMemory)}
			}
		}
		hold.n += n
		return nil
	}
	if r.ContentLength > maxRequestBytes {
		return nil, tooLargeBody()
	}
	if r.ContentLength >= 0 {
		if r.ContentLength == 0 {
			return nil, nil
		}
		if err := take(r.ContentLength); err != nil {
			return nil, err
		}
		body = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, bodyReadError(err)
		}
		return body, nil
	}
	// Chunked: the length is known only at the end. The budget grows with
	// the buffer, which doubles from 64 KiB.
	for {
		if len(body) == cap(body) {
			if len(body) > maxRequestBytes {
				return nil, tooLargeBody()
			}
			grow := max(int64(cap(body)), 64<<10)
			grow = min(grow, maxRequestBytes+1-int64(cap(body)))
			if err := take(grow); err != nil {
				return nil, err
			}
			next := make([]byte, len(body), int64(cap(body))+grow)
			copy(next, body)
			body = next
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			if len(body) > maxRequestBytes {
				return nil, tooLargeBody()
			}
			return body, nil
		}
		if err != nil {
			return nil, bodyReadError(err)
		}
	}
}

func tooLargeBody() error {
	return engine.TooLarge(`Message: {"Errors":["Request size is too large"]}`+"\r\nThe body exceeds %d bytes.", maxRequestBytes)
}

// bodyReadError is the answer to a body that could not be read: 408 when
// the client was too slow (the body timeout passed), 400 otherwise.
func bodyReadError(err error) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &engine.Error{Status: http.StatusRequestTimeout, Code: "RequestTimeout",
			Message: "The request body did not arrive within the server's time limit."}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("The request body is shorter than its Content-Length.")
	}
	return badRequest("The request body could not be read: %v", err)
}

// smallBody is the largest body that draws on the small bodies' share of
// Limits.BodyMemory.
const smallBody = 256 << 10

// newBodyBudgets makes the semaphores that cap the memory of bodies in
// flight: one for small bodies (a quarter of the cap), one for the others.
func newBodyBudgets(l Limits) (small, large *semaphore.Weighted) {
	return semaphore.NewWeighted(l.BodyMemory / 4), semaphore.NewWeighted(l.BodyMemory - l.BodyMemory/4)
}
