package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// sniffTimeout bounds how long a new connection may stay silent before its
// first byte decides between TLS and plain HTTP.
const sniffTimeout = 10 * time.Second

// DualListener serves HTTPS and plain HTTP on one port: it peeks at the first
// byte of each connection, and a TLS handshake record (0x16) gets TLS.
type DualListener struct {
	inner net.Listener
	tls   *tls.Config
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

// NewDualListener wraps ln. Connections are sniffed concurrently, so a client
// that connects and says nothing does not hold up the others.
func NewDualListener(ln net.Listener, cfg *tls.Config) *DualListener {
	l := &DualListener{inner: ln, tls: cfg, conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *DualListener) acceptLoop() {
	var pause time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if acceptCanResume(err) {
				// Out of files (EMFILE/ENFILE), buffers, or a connection
				// aborted before it was taken: the listener itself is fine.
				// New connections wait in the kernel's accept queue (and
				// beyond it retry their SYN) until a file is free, as with
				// net/http's own accept loop; the server stays up.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(pause):
					continue
				case <-l.done:
					return
				}
			}
			select {
			case l.errs <- err:
			case <-l.done:
			}
			return
		}
		pause = 0
		go l.sniff(c)
	}
}

// acceptCanResume reports whether a failed Accept leaves the listener usable:
// a timeout, or one of the errors the system gives while it is short of
// files, memory or buffers, or when a client gave up before its connection
// was taken.
func acceptCanResume(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (l *DualListener) sniff(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	var conn net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == 0x16 && l.tls != nil {
		conn = tls.Server(conn, l.tls)
	}
	select {
	case l.conns <- conn:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection, TLS or plain.
func (l *DualListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting.
func (l *DualListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.inner.Close()
}

// Addr is the listening address.
func (l *DualListener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn replays the bytes read while sniffing.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
