package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/orrery-db/orrery/coord/lock"
)

// routes is the site's URL map.
func (a *App) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /{$}", a.home)
	mux.HandleFunc("GET /events/{event}", a.eventPage)
	mux.HandleFunc("POST /events/{event}/buy", a.buy)
	mux.HandleFunc("POST /events/{event}/race", a.race)
	mux.HandleFunc("POST /events/{event}/reset", a.reset)
	mux.HandleFunc("POST /events/{event}/best", a.best)
	mux.HandleFunc("POST /events/{event}/best-stall", a.bestStall)
	mux.HandleFunc("POST /events/{event}/saga", a.sagaBuy)
	mux.HandleFunc("GET /activity", a.activityPage)
	mux.HandleFunc("GET /activity/stream", a.activityStream)
	mux.HandleFunc("GET /tickets", a.myTickets)
	mux.HandleFunc("POST /tickets/{event}/{ticket}/transfer", a.transfer)
	mux.HandleFunc("GET /messages", a.messages)
	mux.HandleFunc("GET /integrity", a.integrity)
	mux.HandleFunc("POST /user", a.switchUser)
	mux.HandleFunc("POST /switches", a.flipSwitch)
	mux.HandleFunc("GET /code/{file}", a.code)
	mux.HandleFunc("GET /storm", a.stormPage)
	mux.HandleFunc("POST /storm", a.startStorm)
	mux.HandleFunc("GET /storm/stream", a.stormStream)
	// Forms post only from the site's own pages: a cross-site request
	// cannot flip a switch or buy a seat for the visitor.
	return http.NewCrossOriginProtection().Handler(mux)
}

// requestTimeout bounds the Cosmos work of one page or action.
const requestTimeout = 30 * time.Second

// home lists the events and the scenarios.
func (a *App) home(w http.ResponseWriter, r *http.Request) {
	a.render(w, r, http.StatusOK, "home", "Cosmic Ticks", "events", a.events)
}

// sectionView is a section of the seat map, seats grouped by row.
type sectionView struct {
	Section Section
	Rows    [][]Seat
}

// eventView is the event page's data.
type eventView struct {
	Event      Event
	Sections   []sectionView
	Available  int
	Integrity  Integrity
	Strategies []Strategy
	Race       *RaceResult
	RaceLesson Lesson
	// RaceTimeline draws the race on one time axis.
	RaceTimeline *Timeline
	Buy          *Outcome
	Best         *BestResult
	BestLesson   Lesson
	Saga         *SagaResult
	SagaLesson   Lesson
	Activity     []Entry
	// Form is how the scenario controls are set: as the last run left them.
	Form formState
	// ActivityStream is the live stream of this show's lines.
	ActivityStream string
	Error          string
}

// formState is how the event page's controls are set: a result keeps the
// choices that produced it, so running the same scenario again, or the same
// race under another strategy, is one click.
type formState struct {
	Strategy         Strategy
	Buyers           int
	BestCount        int
	BestBuyers       int
	BestLock         bool
	Others           []string // the other buyers' names, in the order they join
	BuyerChoices     []int
	CountChoices     []int
	BestBuyerChoices []int
}

// controlsCookie keeps the visitor's last scenario choices (strategy,
// buyers, seats per buyer, lock), so they survive the page's reload after a
// run and a visit to another page.
const controlsCookie = "controls"

// newFormState is the controls' setting for a request: the defaults, then
// the choices the visitor made last.
func newFormState(r *http.Request) formState {
	f := formState{Strategy: StrategyNaive, Buyers: 2, BestCount: 2, BestBuyers: 2,
		BuyerChoices: []int{2, 3, 4, 6}, CountChoices: []int{1, 2, 3, 4}, BestBuyerChoices: []int{2, 3, 4}}
	for _, id := range buyers(currentUser(r).ID, len(sampleUsers))[1:] {
		f.Others = append(f.Others, userName(id))
	}
	c, err := r.Cookie(controlsCookie)
	if err != nil {
		return f
	}
	q, err := url.ParseQuery(c.Value)
	if err != nil {
		return f
	}
	if st, ok := parseStrategy(q.Get("strategy")); ok {
		f.Strategy = st
	}
	choose := func(to *int, key string, choices []int) {
		if n, err := strconv.Atoi(q.Get(key)); err == nil && slices.Contains(choices, n) {
			*to = n
		}
	}
	choose(&f.Buyers, "buyers", f.BuyerChoices)
	choose(&f.BestCount, "count", f.CountChoices)
	choose(&f.BestBuyers, "best-buyers", f.BestBuyerChoices)
	f.BestLock = q.Get("lock") == "on"
	return f
}

// keepControls remembers the scenario choices a form posted.
func keepControls(w http.ResponseWriter, r *http.Request) {
	q := url.Values{}
	for _, k := range []string{"buyers", "count", "best-buyers", "lock"} {
		if v := r.FormValue(k); v != "" {
			q.Set(k, v)
		}
	}
	if v := r.FormValue("race-strategy"); v != "" {
		q.Set("strategy", v)
	}
	http.SetCookie(w, &http.Cookie{Name: controlsCookie, Value: q.Encode(), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// eventPage shows the seat map, the scenarios' controls and the last result.
func (a *App) eventPage(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	seats, err := a.shop.seats(ctx, ev.ID)
	if err != nil {
		a.fail(w, r, http.StatusBadGateway, "The seat map could not be read: "+plainError(err))
		return
	}
	in, err := checkIntegrity(ctx, a.shop, ev.ID)
	if err != nil {
		a.fail(w, r, http.StatusBadGateway, "The integrity check could not run: "+plainError(err))
		return
	}
	show := activityFilter{Show: ev.ID}
	var lines []Entry
	for _, e := range a.activity.snapshot() {
		if show.match(e) {
			lines = append(lines, e)
		}
	}
	v := eventView{Event: ev, Sections: layout(seats), Integrity: in, Strategies: strategies,
		Activity: latest(lines, 8), ActivityStream: streamURL(show), Form: newFormState(r)}
	for _, s := range seats {
		if s.Status == statusAvailable {
			v.Available++
		}
	}
	if res, ok := a.runs.get(r.URL.Query().Get("run")); ok {
		switch res := res.(type) {
		case RaceResult:
			tl := timeline(res)
			v.Race, v.RaceLesson, v.RaceTimeline = &res, raceLesson(res.Strategy), &tl
			v.Form.Strategy, v.Form.Buyers = res.Strategy, len(res.Outcomes)
		case Outcome:
			v.Buy = &res
		case BestResult:
			v.Best, v.BestLesson = &res, bestLesson(res)
			v.Form.BestCount, v.Form.BestLock = res.Count, res.Locked
			if !res.Stalled {
				v.Form.BestBuyers = len(res.Outcomes)
			}
		case pageError:
			v.Error = string(res)
		case SagaResult:
			v.Saga, v.SagaLesson = &res, sagaLesson(res)
		}
	}
	a.render(w, r, http.StatusOK, "event", ev.Name, "events", v)
}

// layout groups seats by section (in the venue's order) and row.
func layout(seats []Seat) []sectionView {
	var out []sectionView
	for _, sec := range orionHall.Sections {
		sv := sectionView{Section: sec}
		for _, s := range seats {
			if s.Section != sec.Code {
				continue
			}
			for len(sv.Rows) < s.Row {
				sv.Rows = append(sv.Rows, nil)
			}
			sv.Rows[s.Row-1] = append(sv.Rows[s.Row-1], s)
		}
		for _, row := range sv.Rows {
			slices.SortFunc(row, func(x, y Seat) int { return cmp.Compare(x.Number, y.Number) })
		}
		out = append(out, sv)
	}
	return out
}

// pageError is a message the event page shows after a failed action.
type pageError string

// eventRedirect sends the browser back to the event page with a result or
// an error message, both kept server-side under a run id: the page never
// shows text taken from its URL.
func (a *App) eventRedirect(w http.ResponseWriter, r *http.Request, eventID, run, msg string) {
	if run == "" && msg != "" {
		run = a.runs.put(pageError(msg))
	}
	to := "/events/" + eventID
	if run != "" {
		to += "?run=" + url.QueryEscape(run) + "#result"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// buy sells the chosen seat to the current user.
func (a *App) buy(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	keepControls(w, r)
	code := r.FormValue("seat")
	if !validSeat(code) {
		a.eventRedirect(w, r, ev.ID, "", "Choose a seat on the map first.")
		return
	}
	st, ok := parseStrategy(r.FormValue("strategy"))
	if !ok {
		st = StrategyBatch
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	out := a.shop.begin(ctx, st, ev.ID, code, currentUser(r).ID).finish(ctx)
	a.eventRedirect(w, r, ev.ID, a.runs.put(out), "")
}

// race fires several buyers at the chosen seat under one strategy.
func (a *App) race(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	code := r.FormValue("seat")
	if !validSeat(code) {
		a.eventRedirect(w, r, ev.ID, "", "Choose an available seat on the map first, then start the race.")
		return
	}
	st, ok := parseStrategy(r.FormValue("race-strategy"))
	if !ok {
		a.eventRedirect(w, r, ev.ID, "", "Choose a strategy for the race.")
		return
	}
	keepControls(w, r)
	n, err := strconv.Atoi(r.FormValue("buyers"))
	if err != nil || n < 2 || n > len(sampleUsers) {
		n = 2
	}
	users := buyers(currentUser(r).ID, n)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := raceSeat(ctx, a.shop, st, ev.ID, code, users)
	if err != nil {
		a.eventRedirect(w, r, ev.ID, "", "The race could not finish: "+plainError(err))
		return
	}
	a.eventRedirect(w, r, ev.ID, a.runs.put(res), "")
}

// buyers picks n sample users, the current one first.
func buyers(first string, n int) []string {
	out := []string{first}
	for _, u := range sampleUsers {
		if len(out) == n {
			break
		}
		if u.ID != first {
			out = append(out, u.ID)
		}
	}
	return out
}

// reset puts an event back to all seats available.
func (a *App) reset(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	keepControls(w, r)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if err := a.resetEvent(ctx, ev); err != nil {
		a.eventRedirect(w, r, ev.ID, "", "The event could not be reset: "+plainError(err))
		return
	}
	a.eventRedirect(w, r, ev.ID, "", "")
}

// ticketView is a ticket with its event.
type ticketView struct {
	Ticket Ticket
	Event  Event
	// Others are the other holders of an active ticket for the same seat:
	// the seat was sold more than once (a naive race).
	Others []string
}

// ticketsView is the My tickets page's data.
type ticketsView struct {
	Tickets  []ticketView
	Users    []User // whom a ticket can go to
	Transfer *TransferResult
	Lesson   Lesson
}

// TransferResult is what the page says after a transfer.
type TransferResult struct {
	To      string
	Seat    string
	Event   string
	Queued  bool // messaging was down: the notifications wait in the outbox
	Direct  bool // sent without the outbox
	Lost    int  // notifications lost by the direct transfer
	Message string
	OK      bool
}

// myTickets lists the current user's active tickets.
func (a *App) myTickets(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	user := currentUser(r)
	var list []ticketView
	for _, ev := range a.events {
		ts, err := a.shop.ticketsOf(ctx, ev.ID)
		if err != nil {
			a.fail(w, r, http.StatusBadGateway, "Your tickets could not be read: "+plainError(err))
			return
		}
		holders := map[string][]Ticket{}
		for _, t := range ts {
			if t.Status == "active" {
				holders[t.Seat] = append(holders[t.Seat], t)
			}
		}
		for _, t := range ts {
			if t.OwnerID != user.ID || t.Status != "active" {
				continue
			}
			tv := ticketView{Ticket: t, Event: ev}
			for _, o := range holders[t.Seat] {
				if o.ID != t.ID {
					tv.Others = append(tv.Others, userName(o.OwnerID))
				}
			}
			slices.Sort(tv.Others)
			list = append(list, tv)
		}
	}
	slices.SortFunc(list, func(x, y ticketView) int {
		return cmp.Or(x.Event.Date.Compare(y.Event.Date), cmp.Compare(x.Ticket.Seat, y.Ticket.Seat))
	})
	v := ticketsView{Tickets: list, Lesson: transferLesson()}
	for _, u := range sampleUsers {
		if u.ID != user.ID {
			v.Users = append(v.Users, u)
		}
	}
	if res, ok := a.runs.get(r.URL.Query().Get("run")); ok {
		if tr, ok := res.(TransferResult); ok {
			v.Transfer = &tr
		}
	}
	a.render(w, r, http.StatusOK, "tickets", "My tickets", "tickets", v)
}

// transfer gives one of the current user's tickets to another user.
func (a *App) transfer(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	to := r.FormValue("to")
	from := currentUser(r).ID
	if userName(to) == to || to == from {
		a.fail(w, r, http.StatusBadRequest, "Choose someone else to send the ticket to.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res := TransferResult{To: to, Event: ev.Name, Seat: r.FormValue("seat"), Queued: a.switches.MessagingDown.Load(),
		Direct: r.FormValue("how") == "direct"}
	if res.Direct {
		res.Lost, err = transferDirect(ctx, a.shop, a.messenger, ev.Name, ev.ID, r.PathValue("ticket"), from, to)
	} else {
		err = transferTicket(ctx, a.shop, a.outbox, ev.Name, ev.ID, r.PathValue("ticket"), from, to)
	}
	switch {
	case err == nil:
		res.OK = true
	case errors.Is(err, errNotOwner):
		res.Message = "This ticket is no longer yours: nothing was sent."
	default:
		res.Message = "The transfer failed, and nothing was sent: " + plainError(err)
	}
	http.Redirect(w, r, "/tickets?run="+a.runs.put(res)+"#result", http.StatusSeeOther)
}

// messagesView is the messages page's data.
type messagesView struct {
	Notes    []Notification
	Unsent   int
	StatsErr string
	Lesson   Lesson
}

// messages shows the current user's notifications and the outbox backlog.
func (a *App) messages(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	notes, err := notifications(ctx, a.notes, currentUser(r).ID)
	if err != nil {
		a.fail(w, r, http.StatusBadGateway, "Your messages could not be read: "+plainError(err))
		return
	}
	v := messagesView{Notes: notes, Lesson: transferLesson()}
	if st, err := a.relay.Stats(ctx); err != nil {
		v.StatsErr = plainError(err)
	} else {
		v.Unsent = st.Unsent
	}
	a.render(w, r, http.StatusOK, "messages", "Messages", "messages", v)
}

// integrityView is the integrity page: one reconciliation per event.
type integrityView struct {
	Events []Event
	Checks []Integrity
}

// integrity reconciles every event.
func (a *App) integrity(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	v := integrityView{Events: a.events}
	for _, ev := range a.events {
		in, err := checkIntegrity(ctx, a.shop, ev.ID)
		if err != nil {
			a.fail(w, r, http.StatusBadGateway, "The integrity check could not run: "+plainError(err))
			return
		}
		v.Checks = append(v.Checks, in)
	}
	a.render(w, r, http.StatusOK, "integrity", "Integrity", "integrity", v)
}

// switchUser changes the sample user the visitor acts as.
func (a *App) switchUser(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("user")
	if userName(id) == id {
		a.fail(w, r, http.StatusBadRequest, "There is no such user.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: userCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	backTo(w, r, "/")
}

// flipSwitch turns a failure switch on or off.
func (a *App) flipSwitch(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("switch") == "network" {
		on := r.FormValue("on") == "1"
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		if err := a.network.set(ctx, on); err != nil {
			a.fail(w, r, http.StatusBadGateway, "The network faults switch could not be flipped: "+err.Error())
			return
		}
		a.switches.NetworkFaults.Store(on)
		backTo(w, r, "/")
		return
	}
	sw := a.switches.byName(r.FormValue("switch"))
	if sw == nil {
		a.fail(w, r, http.StatusBadRequest, "There is no such switch.")
		return
	}
	sw.Store(r.FormValue("on") == "1")
	backTo(w, r, "/")
}

// best races buyers for the best n seats, with or without the lock.
func (a *App) best(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	n, err := strconv.Atoi(r.FormValue("count"))
	if err != nil || n < 1 || n > 6 {
		n = 2
	}
	k, err := strconv.Atoi(r.FormValue("best-buyers"))
	if err != nil || k < 2 || k > len(sampleUsers) {
		k = 2
	}
	keepControls(w, r)
	var locker *lock.Locker
	if r.FormValue("lock") == "on" {
		locker = a.locker
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := bestAvailable(ctx, a.shop, locker, ev.ID, buyers(currentUser(r).ID, k), n)
	if err != nil {
		a.eventRedirect(w, r, ev.ID, "", "Best available could not finish: "+plainError(err))
		return
	}
	a.eventRedirect(w, r, ev.ID, a.runs.put(res), "")
}

// bestStall shows a lock holder that stalls past its lease being fenced out.
func (a *App) bestStall(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	keepControls(w, r)
	n, err := strconv.Atoi(r.FormValue("count"))
	if err != nil || n < 1 || n > 6 {
		n = 2
	}
	pair := buyers(currentUser(r).ID, 2)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := bestWithStall(ctx, a.shop, a.locker, ev.ID, pair[0], pair[1], n)
	if err != nil {
		a.eventRedirect(w, r, ev.ID, "", "The demonstration could not finish: "+plainError(err))
		return
	}
	a.eventRedirect(w, r, ev.ID, a.runs.put(res), "")
}

// latest returns the last n entries, newest first.
func latest(es []Entry, n int) []Entry {
	es = es[max(0, len(es)-n):]
	slices.Reverse(es)
	return es
}

// activityView is the activity page's data: the lines that pass the
// filter, and the filter's choices.
type activityView struct {
	Entries []Entry
	Total   int // lines in the log, filtered or not
	Filter  activityFilter
	Active  bool
	Stream  string // the live stream's URL for this filter
	Events  []Event
	Topics  []struct{ Value, Label string }
	Users   []User
}

// activityPage shows the live activity log, filtered by the query: one
// show, one topic, one person, only problems.
func (a *App) activityPage(w http.ResponseWriter, r *http.Request) {
	f := parseFilter(r.URL.Query())
	all := a.activity.snapshot()
	var shown []Entry
	for _, e := range all {
		if f.match(e) {
			shown = append(shown, e)
		}
	}
	v := activityView{Entries: latest(shown, 200), Total: len(all), Filter: f, Active: f.active(),
		Stream: streamURL(f), Events: a.events, Topics: topics, Users: sampleUsers}
	a.render(w, r, http.StatusOK, "activity", "Activity", "activity", v)
}

// streamURL is the live stream of the lines that pass a filter.
func streamURL(f activityFilter) string {
	if q := f.query(); q != "" {
		return "/activity/stream?" + q
	}
	return "/activity/stream"
}

// activityStream sends the activity log as server-sent events: the recent
// lines after the client's Last-Event-ID, then each new line as it comes,
// only those that pass the query's filter.
func (a *App) activityStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	f := parseFilter(r.URL.Query())
	after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
	if after == 0 {
		after, _ = strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	}
	recent, ch, cancel := a.activity.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(e Entry) {
		if e.Seq > after && f.match(e) {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, mustJSON(e))
			after = e.Seq
		}
	}
	for _, e := range recent {
		send(e)
	}
	flusher.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			send(e)
			flusher.Flush()
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		}
	}
}

// sagaBuy buys the chosen seat through the purchase saga.
func (a *App) sagaBuy(w http.ResponseWriter, r *http.Request) {
	ev, err := a.eventByID(r.PathValue("event"))
	if err != nil {
		a.fail(w, r, http.StatusNotFound, "There is no such event.")
		return
	}
	keepControls(w, r)
	code := r.FormValue("seat")
	if !validSeat(code) {
		a.eventRedirect(w, r, ev.ID, "", "Choose an available seat on the map first.")
		return
	}
	in := PurchaseInput{EventID: ev.ID, Event: ev.Name, UserID: currentUser(r).ID, Seats: []string{code}, Total: priceOf(code)}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	st, err := a.purchase.Buy(ctx, in)
	if err != nil && st.ID == "" {
		a.eventRedirect(w, r, ev.ID, "", "The purchase could not run: "+plainError(err))
		return
	}
	res := a.purchase.result(ctx, in, st)
	if err != nil && res.Completed() && !res.Confirmation.Queued {
		res.Confirmation.Error = plainError(err)
	}
	a.eventRedirect(w, r, ev.ID, a.runs.put(res), "")
}
