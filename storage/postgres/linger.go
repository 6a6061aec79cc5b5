package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A snapshot's transaction is read-only: ending it commits nothing and
// can wait a little. A snapshot that closes with its transaction sound
// does not send its ROLLBACK in a round trip of its own: its connection
// lingers, with its slot, for at most lingerFor; a snapshot opened
// meanwhile takes it and sends the ROLLBACK ahead of its own BEGIN, in
// its first round trip. A query page or a change-feed page is then three
// round trips, not four. A connection that no snapshot took within
// lingerFor is rolled back and given back to the pool, so that the
// transaction holds the server's horizon of old row versions (vacuum's)
// no longer than that, and a slot no longer when snapshots stop coming.
// (The transaction has no id of its own: it holds back no watermark.)
const (
	lingerFor = 2 * time.Millisecond
	// lingerMax is the most connections that linger at once.
	lingerMax = 4
)

// lingering is the connections of closed snapshots still in their
// transactions, each holding the slot its snapshot held.
type lingering struct {
	mu    sync.Mutex
	conns []lingerer // the oldest first
	timer *time.Timer
	armed bool // the timer is set
	ended bool // the store is closing: nothing lingers from now on
}

type lingerer struct {
	conn  *pgxpool.Conn
	since time.Time
}

// lingerSound ends what the round trips of a closed snapshot kept in h on
// conn, then keeps conn, with its slot, for the next snapshot if its
// transaction is sound (not failed, the connection not lost); false if
// it does not (the caller ends the transaction and gives conn back).
func (s *Store) lingerSound(conn *pgxpool.Conn, h *held) bool {
	s.releaseHeld(conn, h)
	pg := conn.Conn().PgConn()
	if pg.IsClosed() || pg.TxStatus() != 'T' {
		return false
	}
	l := &s.lingering
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || len(l.conns) >= lingerMax {
		return false
	}
	l.conns = append(l.conns, lingerer{conn: conn, since: time.Now()})
	if !l.armed {
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(lingerFor, s.endLingering)
		} else {
			l.timer.Reset(lingerFor)
		}
	}
	return true
}

// unlinger takes the connection that lingered last, with its slot, or
// returns nil.
func (s *Store) unlinger() *pgxpool.Conn {
	l := &s.lingering
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.conns)
	if n == 0 {
		return nil
	}
	conn := l.conns[n-1].conn
	l.conns[n-1] = lingerer{}
	l.conns = l.conns[:n-1]
	return conn
}

// endLingering, the timer's, ends the transactions of the connections that
// lingered lingerFor or longer and gives them and their slots back.
func (s *Store) endLingering() {
	l := &s.lingering
	l.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(l.conns) && now.Sub(l.conns[n].since) >= lingerFor {
		n++
	}
	old := make([]*pgxpool.Conn, n)
	for i := range n {
		old[i] = l.conns[i].conn
	}
	rest := copy(l.conns, l.conns[n:])
	clear(l.conns[rest:])
	l.conns = l.conns[:rest]
	if rest > 0 && !l.ended {
		l.timer.Reset(lingerFor - now.Sub(l.conns[0].since))
	} else {
		l.armed = false
	}
	l.mu.Unlock()
	for _, conn := range old {
		s.rollbackHeld(conn, &held{})
		<-s.slots
	}
}

// endAllLingering closes the lingering connections (the store is closing:
// their transactions end with them) and gives their slots back; nothing
// lingers after it.
func (s *Store) endAllLingering() {
	l := &s.lingering
	l.mu.Lock()
	l.ended = true
	conns := l.conns
	l.conns = nil
	if l.timer != nil {
		l.timer.Stop()
	}
	l.armed = false
	l.mu.Unlock()
	for _, lc := range conns {
		pg := lc.conn.Conn().PgConn()
		pg.Conn().SetDeadline(time.Now().Add(time.Second))
		pg.Close(context.Background())
		lc.conn.Release()
		<-s.slots
	}
}
