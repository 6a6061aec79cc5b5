package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// client is a browser-like client of the test app: it keeps cookies and
// sends the Origin header the site's cross-origin protection expects.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func newTestClient(t *testing.T, ta *testApp) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: ta.url, http: &http.Client{Jar: jar}}
}

// get fetches a page and returns its status and body.
func (c *client) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post submits a form, follows the redirect, and returns the final page.
func (c *client) post(path string, form url.Values) (string, string) {
	c.t.Helper()
	resp, err := c.http.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Request.URL.RequestURI(), string(b)
}

// TestRaceTimeline draws an ETag race: every read ends before the barrier
// and every write starts after it, exactly one write commits and the others
// are refused with 412 against the ETag the winner wrote; every bar lies on
// the axis.
func TestRaceTimeline(t *testing.T) {
	ta := startApp(t)
	res, err := raceSeat(t.Context(), ta.app.shop, StrategyETag, "nebula-nights", "FC-4-4", []string{"alice", "bob", "carol"})
	if err != nil {
		t.Fatal(err)
	}
	tl := timeline(res)
	if len(tl.Lanes) != 3 || tl.Barrier < 0 || tl.Barrier > 100 {
		t.Fatalf("timeline %+v", tl)
	}
	won, refused := 0, 0
	for _, l := range tl.Lanes {
		if l.Read == nil || l.Write == nil {
			t.Fatalf("%s: read %v, write %v; want both drawn", l.User, l.Read, l.Write)
		}
		for _, b := range []*Bar{l.Read, l.Write} {
			if b.Left < 0 || b.Width <= 0 || b.Left+b.Width > 100.05 {
				t.Errorf("%s: bar %+v is off the axis", l.User, b)
			}
		}
		if l.Read.Left > tl.Barrier || l.Write.Left+0.05 < tl.Barrier {
			t.Errorf("%s: read at %.1f%%, write at %.1f%%, barrier at %.1f%%: a write began before every read ended", l.User, l.Read.Left, l.Write.Left, tl.Barrier)
		}
		switch l.Result {
		case "won":
			won++
		case "refused":
			refused++
			if l.Write.Kind != "write-refused" || !strings.Contains(strings.Join(l.Notes, " "), "with 412 Precondition Failed, because the seat's ETag was E2 by then") {
				t.Errorf("%s: %s, %q", l.User, l.Write.Kind, l.Notes)
			}
		}
	}
	if won != 1 || refused != 2 {
		t.Errorf("%d writes committed, %d refused; want 1 and 2", won, refused)
	}
	if len(tl.ETags) != 2 || tl.Ticks[0].Label != "0" || !tl.Ticks[len(tl.Ticks)-1].Last {
		t.Errorf("ETags %v, ticks %v", tl.ETags, tl.Ticks)
	}

	// The page draws it, with a lane per buyer.
	c := newTestClient(t, ta)
	_, page := c.post("/events/cosmic-drift/race", url.Values{"seat": {"FC-4-4"}, "race-strategy": {"batch"}, "buyers": {"4"}})
	if n := strings.Count(page, `class="tl-row tl-lane"`); n != 4 {
		t.Errorf("the race page draws %d lanes, want 4", n)
	}
	if !strings.Contains(page, "with 409 Conflict, because the claim existed") {
		t.Error("the batch race's timeline does not say why the losing writes were refused")
	}
}

// TestControlsPersist: the strategy and buyer count chosen for a race are
// still chosen when the page comes back, and after a visit elsewhere.
func TestControlsPersist(t *testing.T) {
	ta := startApp(t)
	c := newTestClient(t, ta)
	_, page := c.post("/events/nebula-nights/race", url.Values{"seat": {"FL-1-1"}, "race-strategy": {"etag"}, "buyers": {"3"},
		"count": {"3"}, "best-buyers": {"4"}, "lock": {"on"}})
	for _, p := range []string{page, func() string { _, b := c.get("/events/cosmic-drift"); return b }()} {
		for _, want := range []string{`value="etag" checked`, `value="3" selected>3<`, `name="lock" value="on" checked`, `value="4" selected>4<`} {
			if !strings.Contains(p, want) {
				t.Errorf("after an ETag race of 3 buyers the page lacks %q", want)
			}
		}
		if strings.Contains(p, `value="naive" checked`) {
			t.Error("the naive strategy is checked again")
		}
	}
}

// TestDoubleBookedTicketFlagged: after a naive race both holders' "My
// tickets" say the seat was sold twice and to whom else; a ticket of one's
// own is not flagged.
func TestDoubleBookedTicketFlagged(t *testing.T) {
	ta := startApp(t)
	if _, err := raceSeat(t.Context(), ta.app.shop, StrategyNaive, "starlight-symphony", "FR-2-2", []string{"alice", "bob"}); err != nil {
		t.Fatal(err)
	}
	if o := ta.app.shop.begin(t.Context(), StrategyBatch, "starlight-symphony", "FR-2-3", "alice").finish(t.Context()); !o.Won {
		t.Fatal(o.Message)
	}
	c := newTestClient(t, ta)
	_, page := c.get("/tickets")
	if strings.Count(page, "Double booked:") != 1 || !strings.Contains(page, "<strong>Double booked:</strong> Bob also holds a ticket for this seat.") {
		t.Errorf("Alice's tickets do not flag the seat Bob also holds once:\n%s", page)
	}
	c.post("/user", url.Values{"user": {"bob"}})
	if _, page := c.get("/tickets"); !strings.Contains(page, "<strong>Double booked:</strong> Alice also holds a ticket for this seat.") {
		t.Error("Bob's tickets do not flag the seat Alice also holds")
	}
}

// TestActivityFilter: the activity page and its stream show only the lines
// of the chosen show, topic, person or problems, escaping what the query
// says.
func TestActivityFilter(t *testing.T) {
	ta := startApp(t)
	a := ta.app.activity
	a.add("nebula-nights", line{"N: Alice paid", "", "alice", topicOrders})
	a.add("cosmic-drift", line{"C: Bob's card was declined", "bad", "bob", topicPayments})
	a.add("cosmic-drift", line{"C: ticket held by Alice", "good", "alice", topicTickets})
	c := newTestClient(t, ta)
	for q, want := range map[string][]string{
		"":                              {"N: Alice paid", "C: Bob&#39;s card was declined", "C: ticket held by Alice"},
		"show=cosmic-drift":             {"C: Bob&#39;s card was declined", "C: ticket held by Alice"},
		"who=alice":                     {"N: Alice paid", "C: ticket held by Alice"},
		"what=payments":                 {"C: Bob&#39;s card was declined"},
		"problems=1":                    {"C: Bob&#39;s card was declined"},
		"show=cosmic-drift&who=alice":   {"C: ticket held by Alice"},
		"show=%3Cscript%3Ealert(1)%3C/": {},
	} {
		_, page := c.get("/activity?" + q)
		for _, l := range []string{"N: Alice paid", "C: Bob&#39;s card was declined", "C: ticket held by Alice"} {
			if got, wanted := strings.Contains(page, l), contains(want, l); got != wanted {
				t.Errorf("/activity?%s shows %q: %v, want %v", q, l, got, wanted)
			}
		}
		if strings.Contains(page, "<script>alert") {
			t.Errorf("/activity?%s echoes the query unescaped", q)
		}
	}
	// The stream filters too: the recent lines it replays are the filter's.
	resp, err := http.Get(ta.url + "/activity/stream?show=cosmic-drift&what=tickets")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var got []string
	for len(got) < 1 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(l, "data: "); ok {
			var e Entry
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Text)
		}
	}
	a.add("nebula-nights", line{"N: not this one", "", "alice", topicTickets})
	a.add("cosmic-drift", line{"C: this one", "", "carol", topicTickets})
	for len(got) < 2 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(l, "data: "); ok {
			var e Entry
			json.Unmarshal([]byte(data), &e)
			got = append(got, e.Text)
		}
	}
	if got[0] != "C: ticket held by Alice" || got[1] != "C: this one" {
		t.Errorf("the filtered stream sent %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestStormPage starts a storm of 100 buyers from the page: a second start
// while it runs is refused, the live stream's counts only grow, and the
// last snapshot says every seat was sold once and every buyer answered.
func TestStormPage(t *testing.T) {
	ta := startApp(t)
	c := newTestClient(t, ta)
	where, page := c.post("/storm", url.Values{"strategy": {"etag"}, "buyers": {"100"}})
	if where != "/storm" || !strings.Contains(page, "100 buyers, 100 seats: ETag conditional write") {
		t.Fatalf("after starting a storm: %s\n%s", where, page)
	}
	run := ta.app.storms.latest()
	if _, again := c.post("/storm", url.Values{"strategy": {"batch"}, "buyers": {"100"}}); ta.app.storms.latest() != run {
		t.Fatalf("a second storm started while one ran")
	} else if !strings.Contains(again, "A storm is already running") {
		select {
		case <-run.done: // it had already finished: a second one may start
		default:
			t.Errorf("a second start while the storm runs is not refused in words")
		}
	}

	resp, err := http.Get(ta.url + "/storm/stream?run=" + run.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var last StormSnapshot
	done := false
	deadline := time.Now().Add(2 * time.Minute)
	for !done && time.Now().Before(deadline) {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the done event: %v", err)
		}
		if l == "event: done\n" {
			done = true
			continue
		}
		if data, ok := strings.CutPrefix(l, "data: "); ok {
			var s StormSnapshot
			if err := json.Unmarshal([]byte(data), &s); err != nil {
				t.Fatal(err)
			}
			if s.Answered < last.Answered || s.Won < last.Won || s.Taken < last.Taken {
				t.Errorf("counts went back: %+v after %+v", s, last)
			}
			var sum int64
			for _, b := range s.Buckets {
				sum += b.Count
			}
			if sum != s.Answered || s.Won+s.Taken+s.Failed != s.Answered {
				t.Errorf("snapshot does not add up: %d in the histogram, %d+%d+%d answers, %d answered", sum, s.Won, s.Taken, s.Failed, s.Answered)
			}
			last = s
		}
	}
	if !done {
		t.Fatal("the storm did not finish in 2 minutes")
	}
	// The done event's data line follows it.
	l, _ := r.ReadString('\n')
	json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &last)
	if last.Phase != "done" || last.Answered != 100 || last.Won != 100 || last.Failed != 0 || !last.OK ||
		!strings.HasPrefix(last.Verdict, "Every seat sold exactly once") {
		t.Errorf("last snapshot %+v", last)
	}

	// Bad input starts nothing.
	for _, form := range []url.Values{
		{"strategy": {"etag"}, "buyers": {"1000000"}},
		{"strategy": {"telepathy"}, "buyers": {"100"}},
		{"strategy": {"etag"}, "buyers": {"-1"}},
	} {
		if _, page := c.post("/storm", form); ta.app.storms.latest() != run || !strings.Contains(page, "notice-warn") {
			t.Errorf("POST /storm %v started a storm or said nothing", form)
		}
	}
	if code, _ := c.get("/storm/stream?run=storm-nope"); code != http.StatusNotFound {
		t.Errorf("the stream of an unknown storm: %d", code)
	}
}

// TestFavicon: the icon the pages link is served, and so is /favicon.ico.
func TestFavicon(t *testing.T) {
	ta := startApp(t)
	resp, err := http.Get(ta.url + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("/favicon.ico: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestStormHistogram: each answer lands in the bucket of its latency, a
// bound belonging to the bucket above it, and the labels read as ranges.
func TestStormHistogram(t *testing.T) {
	var p stormProgress
	for _, d := range []time.Duration{0, 999 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 700 * time.Millisecond, time.Hour} {
		p.answer(Outcome{Won: true, Latency: d})
	}
	want := map[int]int64{0: 2, 1: 1, 2: 1, 9: 1, len(stormBounds): 1}
	for i := range p.buckets {
		if p.buckets[i].Load() != want[i] {
			t.Errorf("bucket %d (%s) holds %d, want %d", i, bucketLabel(i), p.buckets[i].Load(), want[i])
		}
	}
	for i, l := range map[int]string{0: "under 1 ms", 1: "1–2 ms", 9: "500 ms–1 s", 10: "1–2 s", len(stormBounds): "5 s or more"} {
		if bucketLabel(i) != l {
			t.Errorf("bucket %d is labelled %q, want %q", i, bucketLabel(i), l)
		}
	}
	if thousands(1000) != "1,000" || thousands(999) != "999" || thousands(1234567) != "1,234,567" {
		t.Error("thousands")
	}
}

// TestTimelineAxis: whatever a race lasts, its axis has at most five round
// ticks, the unit written once, on the last.
func TestTimelineAxis(t *testing.T) {
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2300 * time.Microsecond, 17 * time.Millisecond, 480 * time.Millisecond, 3 * time.Second} {
		at := time.Unix(0, 0)
		r := RaceResult{Started: at, Strategy: StrategyBatch, Outcomes: []Outcome{{UserID: "alice",
			Trace: Trace{WriteStart: at, WriteEnd: at.Add(d), WriteStatus: http.StatusOK}}}}
		tl := timeline(r)
		var labels []string
		for _, tk := range tl.Ticks {
			labels = append(labels, tk.Label)
		}
		if n := len(tl.Ticks); n < 2 || n > 5 || tl.Span < d || !strings.HasSuffix(labels[n-1], " ms") || strings.Contains(labels[n-2], "ms") {
			t.Errorf("a race of %v: axis of %v, ticks %q", d, tl.Span, labels)
		}
	}
}
