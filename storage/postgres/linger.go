package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orrery-db/orrery/storage"
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
//
// A lingering connection's slot is never waited for: a batch or a
// snapshot that finds no slot free takes a lingering connection instead
// (a batch ends its transaction first, a round trip, and keeps its slot),
// woken by the linger if it was already waiting (see takeSlot).
const lingerFor = 2 * time.Millisecond

// lingering is the connections of closed snapshots still in their
// transactions, each holding the slot its snapshot held.
type lingering struct {
	// lingerFor is lingerFor (tests set another before any snapshot).
	lingerFor time.Duration
	mu        sync.Mutex
	conns     []lingerer // the oldest first
	timer     *time.Timer
	armed     bool // the timer is set
	ended     bool // the store is closing: nothing lingers from now on
	// more is sent to (never blocking: one is enough) while a connection
	// lingers that a waiter for a slot may take.
	more chan struct{}
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
	if l.ended {
		return false
	}
	l.conns = append(l.conns, lingerer{conn: conn, since: time.Now()})
	l.signal()
	if !l.armed {
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.lingerFor, s.endLingering)
		} else {
			l.timer.Reset(l.lingerFor)
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
	if n > 1 {
		l.signal() // for another waiter
	}
	return conn
}

// signal tells a waiter for a slot, if any, that a connection lingers.
// The caller holds mu.
func (l *lingering) signal() {
	select {
	case l.more <- struct{}{}:
	default:
	}
}

// takeSlot takes a slot for a holder of a connection (a shared batch, a
// snapshot), waiting while every slot is held, or, when none is free, a
// lingering connection with its slot. A batch (forBatch) takes a free
// slot first, and ends a lingering connection's transaction (its round
// trip) before it keeps its slot; a snapshot takes a lingering
// connection first and returns it (its first round trip ends the
// transaction). conn is nil when a slot was taken alone.
func (s *Store) takeSlot(ctx context.Context, forBatch bool) (conn *pgxpool.Conn, err error) {
	for {
		if forBatch {
			select {
			case s.slots <- struct{}{}:
				return nil, nil
			default:
			}
		}
		if conn := s.unlinger(); conn != nil {
			if forBatch {
				s.rollbackHeld(conn, &held{})
				return nil, nil
			}
			return conn, nil
		}
		select {
		case s.slots <- struct{}{}:
			return nil, nil
		case <-s.lingering.more:
		case <-ctx.Done():
			return nil, &callerGone{err: ctx.Err()}
		case <-s.closeCtx.Done():
			return nil, storage.ErrClosed
		}
	}
}

// endLingering, the timer's, ends the transactions of the connections that
// lingered lingerFor or longer and gives them and their slots back.
func (s *Store) endLingering() {
	l := &s.lingering
	l.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(l.conns) && now.Sub(l.conns[n].since) >= l.lingerFor {
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
		l.timer.Reset(l.lingerFor - now.Sub(l.conns[0].since))
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
