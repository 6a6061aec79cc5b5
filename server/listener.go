package server

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// sniffTimeout bounds how long a new connection may stay silent before its
// first byte decides between TLS and plain HTTP.
const sniffTimeout = 10 * time.Second

// handshakeSlots bounds the TLS handshakes the server computes at once. When
// thousands of clients connect together, unbounded handshakes share the
// cores and all finish late, past the clients' handshake timeouts (10 s in
// the SDKs' transports); bounded, they finish in turn and only the last ones
// wait. A connection holds a slot from its whole ClientHello to the
// server's first reply, which is the server's part of the work: a client
// that sends slowly, or stalls after the server's reply, holds none.
var handshakeSlots = max(4, 2*runtime.GOMAXPROCS(0))

// DualListener serves HTTPS and plain HTTP on one port: it peeks at the first
// byte of each connection, and a TLS handshake record (0x16) gets TLS.
type DualListener struct {
	inner net.Listener
	tls   *tls.Config
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
	slots chan struct{} // handshakes being computed
}

// NewDualListener wraps ln. Connections are sniffed concurrently, so a client
// that connects and says nothing does not hold up the others.
func NewDualListener(ln net.Listener, cfg *tls.Config) *DualListener {
	l := &DualListener{inner: ln, tls: cfg, conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{}),
		slots: make(chan struct{}, handshakeSlots)}
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
	deadline := time.Now().Add(sniffTimeout)
	c.SetReadDeadline(deadline)
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	var conn net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == 0x16 && l.tls != nil {
		// The ClientHello record whole (as much of it as the buffer
		// holds) before taking a slot; a short or broken one is the
		// handshake's to refuse.
		if hdr, err := br.Peek(5); err == nil {
			br.Peek(min(5+int(binary.BigEndian.Uint16(hdr[3:5])), br.Size()))
		}
		c.SetReadDeadline(time.Time{})
		wait := time.NewTimer(time.Until(deadline))
		select {
		case l.slots <- struct{}{}:
			wait.Stop()
		case <-wait.C:
			// No slot within the time a client's first bytes get: the
			// client sees its connection closed and retries, as after
			// its own handshake timeout.
			c.Close()
			return
		case <-l.done:
			wait.Stop()
			c.Close()
			return
		}
		conn = tls.Server(&handshakeConn{peekedConn: conn.(*peekedConn), slots: l.slots}, l.tls)
	} else {
		c.SetReadDeadline(time.Time{})
	}
	select {
	case l.conns <- conn:
	case <-l.done:
		conn.Close()
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

// peekedConn replays the bytes read while sniffing, then reads from the
// connection itself: every later read would otherwise go through the
// sniffing buffer and be copied once more. Its reads are not concurrent
// (net/http and crypto/tls read a connection from one goroutine at a
// time).
//
// It also sets its deadlines on the connection lazily. net/http changes a
// connection's deadlines eight times per request (the header and body
// limits, the write limit and its end, its background read's start, abort
// and end, the idle limit), each a change of a runtime timer, while the
// connection is read or written about three times. A deadline set while no
// read (or write) is under way is kept here and given to the connection as
// the next read (write) begins, if it differs from the connection's; one
// set while a read (write) is under way is given at once. Every read and
// write thus runs under the deadline last set before or during it, as on the
// connection itself; what changes is only that deadlines superseded before
// any read or write are never set (TestARequestChangesItsConnectionsDeadlinesAtMostFourTimes).
type peekedConn struct {
	net.Conn
	r *bufio.Reader // nil once what it held has been read

	mu sync.Mutex
	// rd and wd are the read and write deadlines last asked for, and the
	// ones the connection has.
	rd, wd lazyDeadline
}

// lazyDeadline is one of a connection's deadlines: the one last asked for
// (want) and the one the connection was given (set); busy counts the reads
// or writes under way, during which a new deadline is given at once.
type lazyDeadline struct {
	want, set time.Time
	busy      int
}

// begin gives the connection the deadline asked for, if it has another,
// and counts one more read or write under way. The caller holds c.mu.
func (d *lazyDeadline) begin(c net.Conn, read bool) error {
	if !d.want.Equal(d.set) {
		if err := setDeadline(c, read, d.want); err != nil {
			return err
		}
		d.set = d.want
	}
	d.busy++
	return nil
}

// update asks for t, given to the connection at once while a read or write
// is under way. The caller holds c.mu.
func (d *lazyDeadline) update(c net.Conn, read bool, t time.Time) error {
	d.want = t
	if d.busy == 0 || t.Equal(d.set) {
		return nil
	}
	d.set = t
	return setDeadline(c, read, t)
}

func setDeadline(c net.Conn, read bool, t time.Time) error {
	if read {
		return c.SetReadDeadline(t)
	}
	return c.SetWriteDeadline(t)
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	c.mu.Lock()
	err := c.rd.begin(c.Conn, true)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.rd.busy--
	c.mu.Unlock()
	return n, err
}

func (c *peekedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	err := c.wd.begin(c.Conn, false)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.wd.busy--
	c.mu.Unlock()
	return n, err
}

func (c *peekedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rd.update(c.Conn, true, t)
}

func (c *peekedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wd.update(c.Conn, false, t)
}

func (c *peekedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.rd.update(c.Conn, true, t), c.wd.update(c.Conn, false, t))
}

// handshakeConn gives its handshake slot back at the server's first write
// (its reply to the ClientHello, or an alert) or at close.
type handshakeConn struct {
	*peekedConn
	slots chan struct{}
	once  sync.Once
}

func (c *handshakeConn) release() { c.once.Do(func() { <-c.slots }) }

func (c *handshakeConn) Write(p []byte) (int, error) {
	c.release()
	return c.peekedConn.Write(p)
}

func (c *handshakeConn) Close() error {
	c.release()
	return c.peekedConn.Close()
}
