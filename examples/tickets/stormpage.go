package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stormBounds are the upper bounds of the storm page's latency histogram
// buckets; a last bucket holds everything slower.
var stormBounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
}

// stormBuyerChoices are the crowd sizes the storm page offers; the largest
// is the default and the limit.
var stormBuyerChoices = []int{100, 500, 1000}

// stormProgress counts a storm's answers as they come, for the storm page:
// safe to update from every buyer's goroutine and to read at any time. A
// nil *stormProgress ignores everything.
type stormProgress struct {
	released      atomic.Int64 // Unix nanoseconds of the release; 0 while seeding
	finished      atomic.Int64 // Unix nanoseconds of the last answer's count
	answered, won atomic.Int64
	taken, failed atomic.Int64
	buckets       [len(stormBounds) + 1]atomic.Int64
	// onAnswer, when set, hears every answer (the tests read them).
	onAnswer func(Outcome)
}

// release records the moment the buyers were let go.
func (p *stormProgress) release(at time.Time) {
	if p != nil {
		p.released.Store(at.UnixNano())
	}
}

// answer counts one buyer's answer.
func (p *stormProgress) answer(o Outcome) {
	if p == nil {
		return
	}
	if p.onAnswer != nil {
		p.onAnswer(o)
	}
	switch {
	case o.Won:
		p.won.Add(1)
	case o.Failed:
		p.failed.Add(1)
	default:
		p.taken.Add(1)
	}
	i, _ := slices.BinarySearch(stormBounds[:], o.Latency)
	if i < len(stormBounds) && o.Latency == stormBounds[i] {
		i++ // a bucket's bound belongs to the next one: [lower, upper)
	}
	p.buckets[i].Add(1)
	p.answered.Add(1) // last: a reader that sees n answers sees their counts
}

// stormRun is one storm started from the storm page.
type stormRun struct {
	ID       string
	Strategy Strategy
	Buyers   int
	Started  time.Time
	progress stormProgress
	done     chan struct{} // closed when report and err are set
	report   StormReport
	err      error
}

// stormRunner runs the storm page's storms, one at a time, and keeps the
// last one for the page and its live stream.
type stormRunner struct {
	mu   sync.Mutex
	last *stormRun
}

// errStormRunning refuses a second storm while one runs.
var errStormRunning = errors.New("a storm is already running")

// start launches a storm in the background on ctx (not a request's: the
// storm outlives the request that started it) unless one is running.
func (s *stormRunner) start(ctx context.Context, wg *sync.WaitGroup, shop *Shop, st Strategy, buyers int) (*stormRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil {
		select {
		case <-s.last.done:
		default:
			return s.last, errStormRunning
		}
	}
	run := &stormRun{ID: newID("storm"), Strategy: st, Buyers: buyers, Started: time.Now(), done: make(chan struct{})}
	s.last = run
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		run.report, run.err = runStorm(ctx, shop, st, buyers, &run.progress)
		run.progress.finished.Store(time.Now().UnixNano())
		close(run.done)
	})
	return run, nil
}

// latest returns the last storm started, or nil.
func (s *stormRunner) latest() *stormRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// StormSnapshot is a storm's progress as the page shows it, and as the
// live stream sends it (JSON).
type StormSnapshot struct {
	ID        string        `json:"id"`
	Strategy  Strategy      `json:"strategy"`
	Title     string        `json:"title"`
	Buyers    int           `json:"buyers"`
	Seats     int           `json:"seats"`
	Phase     string        `json:"phase"` // "seeding", "buying" or "done"
	Answered  int64         `json:"answered"`
	Won       int64         `json:"won"`
	Taken     int64         `json:"taken"`
	Failed    int64         `json:"failed"`
	Elapsed   string        `json:"elapsed"`
	Buckets   []StormBucket `json:"buckets"`
	Status    string        `json:"status"`  // one sentence: where the storm stands
	Verdict   string        `json:"verdict"` // when done
	OK        bool          `json:"ok"`
	Latencies string        `json:"latencies"` // when done: p50, p99, max
}

// StormBucket is one bar of the latency histogram.
type StormBucket struct {
	Label string  `json:"label"`
	Count int64   `json:"count"`
	Width float64 `json:"width"` // percent of the fullest bucket
}

// snapshot reads a storm's progress.
func (r *stormRun) snapshot() StormSnapshot {
	p := &r.progress
	s := StormSnapshot{ID: r.ID, Strategy: r.Strategy, Title: raceLesson(r.Strategy).Title, Buyers: r.Buyers,
		Seats: stormArena.Sections[0].Rows * stormArena.Sections[0].Seats}
	s.Answered = p.answered.Load()
	s.Won, s.Taken, s.Failed = p.won.Load(), p.taken.Load(), p.failed.Load()
	var top int64
	counts := make([]int64, len(p.buckets))
	for i := range p.buckets {
		counts[i] = p.buckets[i].Load()
		top = max(top, counts[i])
	}
	for i, n := range counts {
		b := StormBucket{Label: bucketLabel(i), Count: n}
		if top > 0 {
			b.Width = float64(n*1000/top) / 10
		}
		s.Buckets = append(s.Buckets, b)
	}
	released := p.released.Load()
	finished := p.finished.Load()
	select {
	case <-r.done:
		s.Phase = "done"
	default:
		s.Phase = "buying"
		if released == 0 {
			s.Phase = "seeding"
		}
	}
	switch {
	case s.Phase == "seeding":
		s.Status = fmt.Sprintf("Preparing: clearing the last storm and putting %d seats on sale.", s.Seats)
	case s.Phase == "buying":
		s.Elapsed = humanDuration(time.Since(time.Unix(0, released)))
		s.Status = fmt.Sprintf("Running for %s: %s of %s buyers answered.", s.Elapsed, thousands(int(s.Answered)), thousands(s.Buyers))
	case r.err != nil:
		s.Status = "The storm could not finish: " + plainError(r.err)
		s.Verdict = s.Status
	default:
		rep := r.report
		if released != 0 {
			s.Elapsed = humanDuration(time.Unix(0, finished).Sub(time.Unix(0, released)))
		}
		s.Status = fmt.Sprintf("Finished in %s: %s sold, %s turned away, %s errors.", humanDuration(rep.Elapsed),
			thousands(rep.Won), thousands(rep.Taken), thousands(rep.Failed))
		if rep.Settled > 0 {
			s.Status += fmt.Sprintf(" %s replies were lost after the write was sent; each buyer read back to learn whether its write had committed.", thousands(rep.Settled))
		}
		s.Latencies = fmt.Sprintf("Time from release to answer: median %s, 99th percentile %s, slowest %s.",
			humanDuration(rep.P50), humanDuration(rep.P99), humanDuration(rep.Max))
		s.OK = rep.OK()
		switch {
		case s.OK:
			s.Verdict = fmt.Sprintf("Every seat sold exactly once, every buyer answered, and the storm's show reconciles: %d seats, %d paid orders, %d tickets.",
				rep.Integrity.SeatsSold, rep.Integrity.PaidOrders, rep.Integrity.Tickets)
		case len(rep.Integrity.DoubleSold) > 0:
			s.Verdict = fmt.Sprintf("%d seats were sold more than once: %s buyers were told they bought one of %d seats, and %s tickets exist for them.",
				len(rep.Integrity.DoubleSold), thousands(rep.Won), s.Seats, thousands(rep.Integrity.Tickets))
		default:
			s.Verdict = fmt.Sprintf("The storm did not reconcile: %d sold, %d errors, %d of %d answered.", rep.Won, rep.Failed, rep.Answered, rep.Buyers)
		}
	}
	return s
}

// humanDuration writes a duration for people: "8.4 ms", "240 ms", "2.76 s".
func humanDuration(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// thousands writes a count with thousands separators: 1,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// bucketLabel names histogram bucket i: "under 1 ms", "20–50 ms",
// "500 ms–1 s", "5 s or more".
func bucketLabel(i int) string {
	unit := func(t time.Duration) (time.Duration, string) {
		if t >= time.Second {
			return t / time.Second, "s"
		}
		return t / time.Millisecond, "ms"
	}
	switch {
	case i == 0:
		n, u := unit(stormBounds[0])
		return fmt.Sprintf("under %d %s", n, u)
	case i == len(stormBounds):
		n, u := unit(stormBounds[i-1])
		return fmt.Sprintf("%d %s or more", n, u)
	}
	lo, lu := unit(stormBounds[i-1])
	hi, hu := unit(stormBounds[i])
	if lu == hu {
		return fmt.Sprintf("%d–%d %s", lo, hi, hu)
	}
	return fmt.Sprintf("%d %s–%d %s", lo, lu, hi, hu)
}

// stormView is the storm page's data.
type stormView struct {
	Run        *StormSnapshot
	Strategies []Strategy
	Strategy   Strategy
	Choices    []int
	Buyers     int
	Running    bool
	Note       string
}

// stormPage shows the storm form and the last storm, live while it runs.
func (a *App) stormPage(w http.ResponseWriter, r *http.Request) {
	v := stormView{Strategies: []Strategy{StrategyETag, StrategyBatch, StrategyNaive}, Strategy: StrategyBatch,
		Choices: stormBuyerChoices, Buyers: stormBuyerChoices[len(stormBuyerChoices)-1]}
	if run := a.storms.latest(); run != nil {
		snap := run.snapshot()
		v.Run, v.Running = &snap, snap.Phase != "done"
		v.Strategy, v.Buyers = run.Strategy, run.Buyers
	}
	if res, ok := a.runs.get(r.URL.Query().Get("note")); ok {
		if msg, ok := res.(pageError); ok {
			v.Note = string(msg)
		}
	}
	a.render(w, r, http.StatusOK, "storm", "Storm", "storm", v)
}

// startStorm starts a storm from the page's form.
func (a *App) startStorm(w http.ResponseWriter, r *http.Request) {
	st, ok := parseStrategy(r.FormValue("strategy"))
	if !ok {
		http.Redirect(w, r, "/storm?note="+a.runs.put(pageError("Choose a strategy for the storm.")), http.StatusSeeOther)
		return
	}
	n, err := strconv.Atoi(r.FormValue("buyers"))
	if err != nil || !slices.Contains(stormBuyerChoices, n) {
		http.Redirect(w, r, "/storm?note="+a.runs.put(pageError("Choose how many buyers to release.")), http.StatusSeeOther)
		return
	}
	if _, err := a.storms.start(a.bg, &a.workers, a.shop, st, n); err != nil {
		http.Redirect(w, r, "/storm?note="+a.runs.put(pageError("A storm is already running: watch it below, then start another.")), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/storm#live", http.StatusSeeOther)
}

// stormStream sends the last storm's progress as server-sent events, a
// snapshot every 200 ms while it runs and a last one, of event type "done",
// when it has finished.
func (a *App) stormStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	run := a.storms.latest()
	if run == nil || run.ID != r.URL.Query().Get("run") {
		http.Error(w, "no such storm", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var sent int64 = -1
	for {
		snap := run.snapshot()
		if snap.Phase == "done" {
			fmt.Fprintf(w, "event: done\ndata: %s\n\n", mustJSON(snap))
			flusher.Flush()
			return
		}
		if snap.Answered != sent || sent < 0 {
			fmt.Fprintf(w, "data: %s\n\n", mustJSON(snap))
			flusher.Flush()
			sent = snap.Answered
		}
		select {
		case <-r.Context().Done():
			return
		case <-run.done:
		case <-tick.C:
		}
	}
}
