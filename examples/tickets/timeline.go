package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Timeline is a race drawn on one time axis: a lane per buyer with its read
// of the seat and its write, placed where they happened, each write marked
// committed or refused. Positions are percentages of the axis.
type Timeline struct {
	Span    time.Duration
	Ticks   []Tick
	Barrier float64 // where the last read ended; negative when nobody read
	Lanes   []Lane
	ETags   []ETagName
	Summary string
}

// Tick is a mark on the time axis.
type Tick struct {
	Pos   float64
	Label string
	Last  bool // drawn right-aligned so that it stays inside the axis
}

// Lane is one buyer's row of the timeline.
type Lane struct {
	User   string
	Read   *Bar
	Write  *Bar
	Result string // "won", "refused", "skipped" (saw the seat taken) or "error"
	Notes  []string
}

// Bar is a read or a write on the axis.
type Bar struct {
	Left, Width float64
	Kind        string // "read", "write-ok", "write-refused", "write-error"
	Mark        string // drawn at the write's end: ✓ or ✕
}

// ETagName is a short name (E1, E2, ...) for one of the seat's ETags.
type ETagName struct {
	Name  string
	Value string
}

// timeline lays out a race: every offset is measured from the moment the
// buyers were released.
func timeline(r RaceResult) Timeline {
	var t Timeline
	end := time.Duration(0)
	lastRead := time.Duration(-1)
	for _, o := range r.Outcomes {
		tr := o.Trace
		if !tr.ReadEnd.IsZero() {
			lastRead = max(lastRead, tr.ReadEnd.Sub(r.Started))
			end = max(end, tr.ReadEnd.Sub(r.Started))
		}
		if !tr.WriteEnd.IsZero() {
			end = max(end, tr.WriteEnd.Sub(r.Started))
		}
	}
	step := tickStep(end)
	t.Span = time.Duration(math.Ceil(float64(max(end, time.Microsecond))/float64(step))) * step
	for at := time.Duration(0); at <= t.Span; at += step {
		last := at+step > t.Span
		label := axisLabel(at, step)
		if last {
			label += " ms"
		}
		t.Ticks = append(t.Ticks, Tick{Pos: t.pos(at), Label: label, Last: last})
	}
	t.Barrier = -1
	if lastRead >= 0 {
		t.Barrier = t.pos(lastRead)
	}

	names := map[azcore.ETag]string{}
	name := func(e azcore.ETag) string {
		if e == "" {
			return "?"
		}
		if n, ok := names[e]; ok {
			return n
		}
		n := fmt.Sprintf("E%d", len(names)+1)
		names[e] = n
		t.ETags = append(t.ETags, ETagName{Name: n, Value: string(e)})
		return n
	}
	for _, o := range r.Outcomes { // the ETags read come first: E1 is the seat as everyone saw it
		if o.Trace.ReadETag != "" {
			name(o.Trace.ReadETag)
		}
	}
	// The write that committed last is what the seat shows.
	order := slices.Clone(r.Outcomes)
	slices.SortStableFunc(order, func(a, b Outcome) int { return a.Trace.WriteEnd.Compare(b.Trace.WriteEnd) })
	var committed []Outcome
	for _, o := range order {
		if ok(o.Trace.WriteStatus) {
			committed = append(committed, o)
			name(o.Trace.WroteETag)
		}
	}
	var winnerETag string
	if len(committed) > 0 {
		winnerETag = name(committed[len(committed)-1].Trace.WroteETag)
		if r.Strategy != StrategyNaive {
			winnerETag = name(committed[0].Trace.WroteETag)
		}
	}

	for _, o := range r.Outcomes {
		tr := o.Trace
		l := Lane{User: userName(o.UserID)}
		if !tr.ReadStart.IsZero() {
			l.Read = t.bar(tr.ReadStart.Sub(r.Started), tr.ReadEnd.Sub(r.Started), "read", "")
			l.Notes = append(l.Notes, fmt.Sprintf("Read the seat: %s, ETag %s (answered at %s).", tr.ReadStatus, name(tr.ReadETag), msLabel(tr.ReadEnd.Sub(r.Started))))
		}
		switch {
		case tr.WriteStart.IsZero() && !o.Failed:
			l.Result = "skipped"
			l.Notes = append(l.Notes, "Saw the seat taken, so it did not write.")
		case tr.WriteStart.IsZero() || tr.WriteStatus == 0 || tr.WriteStatus >= 500 || tr.WriteStatus == http.StatusTooManyRequests:
			l.Result = "error"
			if !tr.WriteStart.IsZero() {
				l.Write = t.bar(tr.WriteStart.Sub(r.Started), tr.WriteEnd.Sub(r.Started), "write-error", "!")
			}
			l.Notes = append(l.Notes, o.Message)
		default:
			if ok(tr.WriteStatus) {
				l.Result = "won"
				l.Write = t.bar(tr.WriteStart.Sub(r.Started), tr.WriteEnd.Sub(r.Started), "write-ok", "✓")
			} else {
				l.Result = "refused"
				l.Write = t.bar(tr.WriteStart.Sub(r.Started), tr.WriteEnd.Sub(r.Started), "write-refused", "✕")
			}
			l.Notes = append(l.Notes, writeNote(r, o, name, winnerETag, committed))
		}
		t.Lanes = append(t.Lanes, l)
	}
	t.Summary = timelineSummary(r, len(committed))
	return t
}

// writeNote says what one buyer's write did and why.
func writeNote(r RaceResult, o Outcome, name func(azcore.ETag) string, winnerETag string, committed []Outcome) string {
	tr := o.Trace
	sent, answered := msLabel(tr.WriteStart.Sub(r.Started)), msLabel(tr.WriteEnd.Sub(r.Started))
	switch r.Strategy {
	case StrategyNaive:
		if len(committed) > 1 && committed[len(committed)-1].UserID == o.UserID {
			return fmt.Sprintf("Sent its write at %s with no condition; accepted at %s, and as the last write it is what the seat shows (ETag %s): the earlier writes were silently overwritten.", sent, answered, name(tr.WroteETag))
		}
		if len(committed) > 1 {
			return fmt.Sprintf("Sent its write at %s with no condition; accepted at %s (ETag %s), then overwritten by a later write. The ticket it wrote stays.", sent, answered, name(tr.WroteETag))
		}
		return fmt.Sprintf("Sent its write at %s with no condition; accepted at %s (ETag %s).", sent, answered, name(tr.WroteETag))
	case StrategyETag:
		if ok(tr.WriteStatus) {
			return fmt.Sprintf("Sent its write at %s with If-Match %s; committed at %s, the seat unchanged since it was read: the seat's ETag became %s.", sent, name(tr.ReadETag), answered, name(tr.WroteETag))
		}
		return fmt.Sprintf("Sent its write at %s with If-Match %s; refused at %s with %d %s, because the seat's ETag was %s by then. Nothing of this purchase was written.", sent, name(tr.ReadETag), answered, tr.WriteStatus, http.StatusText(tr.WriteStatus), winnerETag)
	default:
		if ok(tr.WriteStatus) {
			return fmt.Sprintf("Sent its batch at %s, creating the seat's claim; committed at %s: its claim was the first, so the claim, the seat, the order and the ticket were written together.", sent, answered)
		}
		return fmt.Sprintf("Sent its batch at %s, creating the seat's claim; refused at %s with %d %s, because the claim existed: the whole batch rolled back.", sent, answered, tr.WriteStatus, http.StatusText(tr.WriteStatus))
	}
}

// timelineSummary is the timeline's caption: what the picture shows.
func timelineSummary(r RaceResult, committed int) string {
	switch r.Strategy {
	case StrategyNaive:
		return fmt.Sprintf("Every buyer read the seat before any wrote, and %d writes were accepted without a condition: the last one overwrote the others.", committed)
	case StrategyETag:
		return "Every buyer read the same ETag before any wrote; the first write changed it, so every later If-Match was refused."
	}
	return "Nobody read: every buyer created the seat's claim at once, and only the first create could succeed."
}

// ok reports whether a write's status is a success.
func ok(status int) bool { return status >= 200 && status < 300 }

// pos is an offset's place on the axis, in percent.
func (t Timeline) pos(d time.Duration) float64 {
	return math.Round(float64(d)/float64(t.Span)*1000) / 10
}

// bar places a span on the axis; a very short span stays visible.
func (t Timeline) bar(from, to time.Duration, kind, mark string) *Bar {
	left := t.pos(from)
	width := max(t.pos(to)-left, 1.5)
	left = min(left, 100-width)
	return &Bar{Left: left, Width: width, Kind: kind, Mark: mark}
}

// tickStep picks a round step (1, 2 or 5 times a power of ten) that puts
// at most four steps on an axis of length d, so that the labels fit a
// phone's width.
func tickStep(d time.Duration) time.Duration {
	step := 100 * time.Microsecond
	for {
		for _, k := range []time.Duration{1, 2, 5} {
			if d <= 4*k*step {
				return k * step
			}
		}
		step *= 10
	}
}

// axisLabel writes a tick's offset in milliseconds, with a decimal only
// when the step needs one: "0", "0.5", "12".
func axisLabel(d, step time.Duration) string {
	if d == 0 {
		return "0"
	}
	ms := float64(d) / float64(time.Millisecond)
	if step < time.Millisecond {
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

// msLabel writes an offset in milliseconds for people.
func msLabel(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d == 0:
		return "0"
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
