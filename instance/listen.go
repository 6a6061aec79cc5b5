package instance

import (
	"errors"
	"net"
	"strconv"
	"sync"
)

// Listen listens on addr (host:port) for TCP. A host of "localhost" is
// the loopback interface of both IP versions, 127.0.0.1 and ::1 on one port
// (::1 left out where IPv6 is off), so that a client resolving localhost to
// either one connects; an empty host, or 0.0.0.0 or ::, is every
// interface; anything else is as net.Listen takes it.
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "localhost" {
		return net.Listen("tcp", addr)
	}
	v4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	// Port 0 picks a free port for 127.0.0.1; ::1 takes the same one.
	p := strconv.Itoa(v4.Addr().(*net.TCPAddr).Port)
	v6, err := net.Listen("tcp6", net.JoinHostPort("::1", p))
	if err != nil {
		// No IPv6 loopback here: 127.0.0.1 alone.
		return v4, nil
	}
	return newMultiListener(v4, v6), nil
}

// multiListener accepts on several listeners as one; its Addr is the
// first's.
type multiListener struct {
	lns   []net.Listener
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

func newMultiListener(lns ...net.Listener) *multiListener {
	m := &multiListener{lns: lns, conns: make(chan net.Conn), errs: make(chan error, len(lns)), done: make(chan struct{})}
	for _, ln := range lns {
		go m.accept(ln)
	}
	return m
}

func (m *multiListener) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.errs <- err
			return
		}
		select {
		case m.conns <- c:
		case <-m.done:
			c.Close()
			return
		}
	}
}

// Accept returns the next connection of any of the listeners.
func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errs:
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close closes every listener.
func (m *multiListener) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			err = errors.Join(err, ln.Close())
		}
	})
	return err
}

// Addr is the first listener's address.
func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }
