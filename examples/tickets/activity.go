package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/orrery-db/orrery/coord/changefeed"
)

// Entry is one line of the live activity log.
type Entry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Text    string    `json:"text"`
	Kind    string    `json:"kind"`    // "good", "bad" or ""
	EventID string    `json:"eventId"` // the show it is about
	User    string    `json:"user"`    // whom it is about
	Topic   string    `json:"topic"`   // what it is about: one of topics
}

// line is what describe makes of a change: an Entry without its place in
// the log.
type line struct {
	Text, Kind, User, Topic string
}

// The topics a line can have, as the activity page's filter offers them.
const (
	topicOrders   = "orders"
	topicTickets  = "tickets"
	topicSeats    = "seats"
	topicPayments = "payments"
)

// topics are the filter's choices, in the order it lists them.
var topics = []struct{ Value, Label string }{
	{topicOrders, "Orders"}, {topicTickets, "Tickets"}, {topicSeats, "Seats"}, {topicPayments, "Payments"},
}

// activityFilter is what the activity page shows: one show, one topic, one
// person, only problems, or any combination; empty fields match everything.
type activityFilter struct {
	Show     string // event id
	What     string // a topic
	Who      string // user id
	Problems bool   // only lines of kind "bad"
}

// parseFilter reads a filter from a query; unknown values match nothing
// rather than everything, so a mistyped link does not pass for "all".
func parseFilter(q url.Values) activityFilter {
	return activityFilter{Show: q.Get("show"), What: q.Get("what"), Who: q.Get("who"), Problems: q.Get("problems") == "1"}
}

// match reports whether a line passes the filter.
func (f activityFilter) match(e Entry) bool {
	return (f.Show == "" || e.EventID == f.Show) && (f.What == "" || e.Topic == f.What) &&
		(f.Who == "" || e.User == f.Who) && (!f.Problems || e.Kind == "bad")
}

// active reports whether the filter leaves anything out.
func (f activityFilter) active() bool { return f != activityFilter{} }

// query is the filter as URL query parameters (without "?").
func (f activityFilter) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"show": f.Show, "what": f.What, "who": f.Who} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Problems {
		q.Set("problems", "1")
	}
	return q.Encode()
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

// add appends a line about an event and sends it to every listener; a
// listener that is not keeping up misses lines rather than slowing the feed.
func (a *Activity) add(eventID string, l line) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	e := Entry{Seq: a.seq, At: time.Now().UTC(), Text: l.Text, Kind: l.Kind, EventID: eventID, User: l.User, Topic: l.Topic}
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
	Confirm string   `json:"confirmation"`
}

// feedHandler turns a batch of changes to the tickets container into log
// lines. It runs inside coord's change-feed processor, which checkpoints
// after it returns: the log is itself a demonstration of the feed. The
// storm's partitions are left out: a thousand buyers would drown the log
// (the storm page shows them).
func (a *App) feedHandler(ctx context.Context, b changefeed.Batch) error {
	for _, raw := range b.Changes {
		var c change
		if err := json.Unmarshal(raw, &c); err != nil || strings.HasPrefix(c.EventID, stormPrefix) {
			continue
		}
		if l := describe(a.eventName(c.EventID), c); l.Text != "" {
			a.activity.add(c.EventID, l)
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

// describe says in words what a change means, or returns no text for
// changes the log leaves out (seeding, claims).
func describe(event string, c change) line {
	switch c.Type {
	case typeOrder:
		switch {
		case c.Status == "paid" && c.Confirm == confirmationQueued:
			return line{fmt.Sprintf("%s: %s's confirmation committed to the outbox.", event, userName(c.UserID)), "", c.UserID, topicOrders}
		case c.Status == "paid":
			return line{fmt.Sprintf("%s: %s paid $%d for %s (%s).", event, userName(c.UserID), c.Total, seatList(c.Seats), c.How), "", c.UserID, topicOrders}
		case c.Status == "refunded":
			return line{fmt.Sprintf("%s: %s's order was refunded.", event, userName(c.UserID)), "bad", c.UserID, topicOrders}
		case c.Status == "cancelled":
			return line{fmt.Sprintf("%s: %s's order was cancelled before a ticket was issued.", event, userName(c.UserID)), "bad", c.UserID, topicOrders}
		}
	case typeTicket:
		switch c.Status {
		case "active":
			return line{fmt.Sprintf("%s: ticket for %s now held by %s.", event, seatName(c.Seat), userName(c.OwnerID)), "good", c.OwnerID, topicTickets}
		case "revoked":
			return line{fmt.Sprintf("%s: %s's ticket for %s revoked.", event, userName(c.OwnerID), seatName(c.Seat)), "bad", c.OwnerID, topicTickets}
		}
	case typeSeat:
		switch c.Status {
		case statusSold:
			return line{fmt.Sprintf("%s: %s marked sold to %s.", event, seatName(c.Code), userName(c.Holder)), "", c.Holder, topicSeats}
		case statusHeld:
			return line{fmt.Sprintf("%s: %s held for %s.", event, seatName(c.Code), userName(c.Holder)), "", c.Holder, topicSeats}
		case statusAvailable:
			if c.Release != "" {
				return line{fmt.Sprintf("%s: %s released, back on sale.", event, seatName(c.Code)), "bad", "", topicSeats}
			}
		}
	case "charge":
		switch c.Status {
		case "approved":
			return line{fmt.Sprintf("%s: %s's card was charged $%d.", event, userName(c.UserID), c.Amount), "good", c.UserID, topicPayments}
		case "declined":
			return line{fmt.Sprintf("%s: %s's card was declined.", event, userName(c.UserID)), "bad", c.UserID, topicPayments}
		case "refunded":
			return line{fmt.Sprintf("%s: %s was refunded $%d.", event, userName(c.UserID), c.Amount), "bad", c.UserID, topicPayments}
		case "cancelled":
			return line{fmt.Sprintf("%s: %s's charge was cancelled before it was made.", event, userName(c.UserID)), "bad", c.UserID, topicPayments}
		}
	}
	return line{}
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
