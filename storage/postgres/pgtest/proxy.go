package pgtest

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/url"
	"slices"
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
	// log, while logging, holds the round trips with the statements
	// each sent (guarded by mu).
	logging bool
	log     []*Trip
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
		conn := len(p.conns)/2 - 1
		p.mu.Unlock()
		var clientTurn atomic.Bool // the client spoke last on this connection
		dec := &frontendDecoder{names: map[string]string{}}
		var trip *Trip
		go p.pipe(up, c, func(data []byte) {
			if !clientTurn.Swap(true) {
				p.trips.Add(1)
				trip = nil
			}
			syncs, describes := dec.syncs, dec.describes
			statements := dec.feed(data)
			p.mu.Lock()
			if p.logging {
				if trip == nil {
					trip = &Trip{Conn: conn}
					p.log = append(p.log, trip)
				}
				trip.Statements = append(trip.Statements, statements...)
				trip.Syncs += dec.syncs - syncs
				trip.Describes += dec.describes - describes
			}
			p.mu.Unlock()
		})
		go p.pipe(c, up, func([]byte) { clientTurn.Store(false) })
	}
}

// pipe copies src to dst, holding each read until the proxy is unblocked;
// seen is called with each piece read before it is forwarded.
func (p *Proxy) pipe(dst, src net.Conn, seen func(data []byte)) {
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
			seen(buf[:n])
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

// Trip is one round trip a client made through the proxy: the connection
// (numbered in the order the proxy accepted them) and what it sent, one
// string a statement: its SQL as executed, "prepare: SQL" for a statement
// prepared without being executed, "sync" for a Sync that followed nothing
// else, and "startup" for a connection's opening.
type Trip struct {
	Conn       int
	Statements []string
	// Syncs is the number of Syncs it sent: the server flushes its
	// answer at each (as at a Flush), so a trip with one is answered in
	// one piece.
	Syncs int
	// Describes is the number of Describes it sent: each makes the
	// server describe a statement's or a portal's result (a
	// RowDescription), which the client then reads and decodes.
	Describes int
}

// StartLog starts recording the round trips, with their statements, that
// clients make from now on (Log returns them).
func (p *Proxy) StartLog() {
	p.mu.Lock()
	p.logging, p.log = true, nil
	p.mu.Unlock()
}

// Log stops recording and returns the round trips recorded since
// StartLog, in the order they began.
func (p *Proxy) Log() []Trip {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logging = false
	trips := make([]Trip, len(p.log))
	for i, t := range p.log {
		trips[i] = Trip{Conn: t.Conn, Statements: slices.Clone(t.Statements), Syncs: t.Syncs, Describes: t.Describes}
	}
	p.log = nil
	return trips
}

// frontendDecoder reads the messages a client sends in PostgreSQL's
// protocol (version 3) and names the statements among them.
type frontendDecoder struct {
	buf     []byte
	started bool              // past the startup message
	names   map[string]string // prepared statement name to SQL
	bound   string            // the SQL of the last Bind
	parsed  []string          // Parses not yet followed by a Bind
	other   bool              // a message other than Sync since the last statement
	syncs   int               // Syncs read
	// describes is the Describes read.
	describes int
}

// feed takes the next bytes of the stream and returns the statements
// completed in them.
func (d *frontendDecoder) feed(data []byte) []string {
	d.buf = append(d.buf, data...)
	var out []string
	for {
		if !d.started {
			if len(d.buf) < 8 {
				return out
			}
			n := int(binary.BigEndian.Uint32(d.buf))
			if len(d.buf) < n {
				return out
			}
			switch binary.BigEndian.Uint32(d.buf[4:]) {
			case 80877103, 80877104: // SSLRequest, GSSENCRequest: then the startup message
			default:
				d.started = true
				out = append(out, "startup")
			}
			d.buf = d.buf[n:]
			continue
		}
		if len(d.buf) < 5 {
			return out
		}
		n := 1 + int(binary.BigEndian.Uint32(d.buf[1:]))
		if len(d.buf) < n {
			return out
		}
		typ, body := d.buf[0], d.buf[5:n]
		d.buf = d.buf[n:]
		switch typ {
		case 'Q':
			out = append(out, cstring(body))
			d.other = false
		case 'P':
			name := cstring(body)
			query := cstring(body[len(name)+1:])
			d.names[name] = query
			d.parsed = append(d.parsed, query)
			d.other = true
		case 'B':
			portal := cstring(body)
			d.bound = d.names[cstring(body[len(portal)+1:])]
			d.parsed = nil
			d.other = true
		case 'E':
			out = append(out, d.bound)
			d.other = false
		case 'S':
			d.syncs++
			for _, q := range d.parsed {
				out = append(out, "prepare: "+q)
			}
			if len(d.parsed) == 0 && d.other {
				out = append(out, "sync")
			}
			d.parsed, d.other = nil, false
		case 'D':
			d.describes++
			d.other = true
		case 'X':
			out = append(out, "terminate")
		default:
			d.other = true
		}
	}
}

// cstring is the NUL-terminated string at the start of b.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
