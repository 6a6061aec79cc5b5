package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/orrery-db/orrery/coord/changefeed"
)

// Entry is one line of the live activity log.
type Entry struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Text string    `json:"text"`
	Kind string    `json:"kind"` // "good", "bad" or ""
}

// Activity is the live activity log: the lines the change-feed processor
// derived from committed changes, kept in a ring for new viewers and
// fanned out to the pages listening.
type Activity struct {
	mu     sync.Mutex
	seq    int64
	recent []Entry
	limit  int
	subs   map[chan Entry]struct{}
}

// newActivity returns an empty log that keeps the last limit lines.
func newActivity(limit int) *Activity {
	return &Activity{limit: limit, subs: map[chan Entry]struct{}{}}
}

// add appends a line and sends it to every listener; a listener that is
// not keeping up misses lines rather than slowing the feed.
func (a *Activity) add(text, kind string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	e := Entry{Seq: a.seq, At: time.Now().UTC(), Text: text, Kind: kind}
	a.recent = append(a.recent, e)
	if len(a.recent) > a.limit {
		a.recent = a.recent[len(a.recent)-a.limit:]
	}
	for ch := range a.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// subscribe returns the recent lines and a channel of the lines to come;
// cancel stops it.
func (a *Activity) subscribe() (recent []Entry, ch chan Entry, cancel func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch = make(chan Entry, 64)
	a.subs[ch] = struct{}{}
	return append([]Entry(nil), a.recent...), ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.subs, ch)
	}
}

// snapshot returns the recent lines.
func (a *Activity) snapshot() []Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Entry(nil), a.recent...)
}

// change is the part of a changed document the log reads.
type change struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	EventID string   `json:"eventId"`
	Status  string   `json:"status"`
	Holder  string   `json:"holder"`
	Code    string   `json:"code"`
	Seat    string   `json:"seat"`
	Seats   []string `json:"seats"`
	UserID  string   `json:"userId"`
	OwnerID string   `json:"ownerId"`
	Total   int      `json:"total"`
	How     string   `json:"strategy"`
	Amount  int      `json:"amount"`
	Release string   `json:"releasedBy"`
}

// feedHandler turns a batch of changes to the tickets container into log
// lines. It runs inside coord's change-feed processor, which checkpoints
// after it returns: the log is itself a demonstration of the feed.
func (a *App) feedHandler(ctx context.Context, b changefeed.Batch) error {
	for _, raw := range b.Changes {
		var c change
		if err := json.Unmarshal(raw, &c); err != nil {
			continue
		}
		if text, kind := describe(a.eventName(c.EventID), c); text != "" {
			a.activity.add(text, kind)
		}
	}
	return nil
}

// eventName is an event's display name.
func (a *App) eventName(id string) string {
	if e, err := a.eventByID(id); err == nil {
		return e.Name
	}
	return id
}

// describe says in words what a change means, or "" for changes the log
// leaves out (seeding, claims).
func describe(event string, c change) (string, string) {
	switch c.Type {
	case typeOrder:
		switch c.Status {
		case "paid":
			return fmt.Sprintf("%s: %s paid $%d for %s (%s).", event, userName(c.UserID), c.Total, seatList(c.Seats), c.How), ""
		case "refunded":
			return fmt.Sprintf("%s: %s's order was refunded.", event, userName(c.UserID)), "bad"
		}
	case typeTicket:
		switch c.Status {
		case "active":
			return fmt.Sprintf("%s: ticket for %s now held by %s.", event, seatName(c.Seat), userName(c.OwnerID)), "good"
		case "revoked":
			return fmt.Sprintf("%s: ticket for %s revoked.", event, seatName(c.Seat)), "bad"
		}
	case typeSeat:
		switch c.Status {
		case statusSold:
			return fmt.Sprintf("%s: %s marked sold to %s.", event, seatName(c.Code), userName(c.Holder)), ""
		case statusHeld:
			return fmt.Sprintf("%s: %s held for %s.", event, seatName(c.Code), userName(c.Holder)), ""
		case statusAvailable:
			if c.Release != "" {
				return fmt.Sprintf("%s: %s released, back on sale.", event, seatName(c.Code)), "bad"
			}
		}
	case "charge":
		switch c.Status {
		case "approved":
			return fmt.Sprintf("%s: %s's card was charged $%d.", event, userName(c.UserID), c.Amount), "good"
		case "declined":
			return fmt.Sprintf("%s: %s's card was declined.", event, userName(c.UserID)), "bad"
		case "refunded":
			return fmt.Sprintf("%s: %s was refunded $%d.", event, userName(c.UserID), c.Amount), "bad"
		}
	}
	return "", ""
}

// seatList names seats for a sentence.
func seatList(codes []string) string {
	switch len(codes) {
	case 0:
		return "no seats"
	case 1:
		return seatName(codes[0])
	}
	return fmt.Sprintf("%d seats", len(codes))
}
