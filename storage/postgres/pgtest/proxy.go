package pgtest

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server, for tests of a network
// partition between a client and PostgreSQL. While blocked it
// forwards nothing and closes nothing: bytes wait as they would in a
// network that drops packets, and are delivered once it is unblocked, as
// TCP retransmits them after a partition heals.
type Proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	blocked bool
	conns   []net.Conn
	closed  bool
	// trips counts round trips: a client's bytes that follow the server's
	// answer (or open the connection) start one.
	trips atomic.Int64
}

// NewProxy listens on a local port and forwards what it accepts to target
// (host:port); it is closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		var clientTurn atomic.Bool // the client spoke last on this connection
		go p.pipe(up, c, func() {
			if !clientTurn.Swap(true) {
				p.trips.Add(1)
			}
		})
		go p.pipe(c, up, func() { clientTurn.Store(false) })
	}
}

// pipe copies src to dst, holding each read until the proxy is unblocked;
// seen is called before each piece read is forwarded.
func (p *Proxy) pipe(dst, src net.Conn, seen func()) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.blocked && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			seen()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// SetBlocked starts (true) or ends (false) a silent partition.
func (p *Proxy) SetBlocked(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.cond.Broadcast()
	p.mu.Unlock()
}

// RoundTrips is the number of round trips between the clients and the
// server so far, over every connection: each time a client sends after the
// server last spoke on its connection (or first). A pipelined batch of
// statements is one; a statement the driver first prepares is two.
func (p *Proxy) RoundTrips() int64 { return p.trips.Load() }

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is url (a postgres:// URL) through the proxy: its host and port
// replaced by the proxy's.
func (p *Proxy) URL(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

// Target is the host:port of url, for NewProxy.
func Target(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("no host in %q: %v", rawURL, err)
	}
	return u.Host
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}
