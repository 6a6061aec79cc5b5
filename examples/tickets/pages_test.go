package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/saga"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestPagesRejectBadInput sends what a hostile or careless client would:
// unknown events, seats, users, switches and files get a page saying so,
// never a server error or a write.
func TestPagesRejectBadInput(t *testing.T) {
	ta := startApp(t)
	get := func(path string) (int, string) {
		resp, err := http.Get(ta.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(path string, form url.Values) *http.Response {
		resp, err := noRedirect.PostForm(ta.url+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/events/no-such-show", http.StatusNotFound},
		{"/code/no-such-file.go", http.StatusNotFound},
		{"/code/storm_test.go", http.StatusNotFound},
		{"/code/buy.go", http.StatusOK},
		{"/", http.StatusOK},
		{"/integrity", http.StatusOK},
		{"/messages", http.StatusOK},
		{"/tickets", http.StatusOK},
		{"/activity", http.StatusOK},
	} {
		if got, body := get(c.path); got != c.status {
			t.Errorf("GET %s: %d, want %d: %.200s", c.path, got, c.status, body)
		}
	}
	for _, seat := range []string{"", "ZZ-1-1", "FC-99-1", "FC-1-1' OR 1=1"} {
		for _, action := range []string{"buy", "race", "saga"} {
			resp := post("/events/nebula-nights/"+action, url.Values{"seat": {seat}, "race-strategy": {"naive"}})
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "?run=") {
				t.Errorf("%s of seat %q: %d to %q, want a redirect with an error", action, seat, resp.StatusCode, loc)
			}
		}
	}
	if resp := post("/events/nebula-nights/race", url.Values{"seat": {"FC-1-1"}, "race-strategy": {"telepathy"}}); !strings.Contains(resp.Header.Get("Location"), "?run=") {
		t.Errorf("a race under an unknown strategy: %q", resp.Header.Get("Location"))
	}
	// The error is shown on the event page.
	resp := post("/events/nebula-nights/buy", url.Values{"seat": {"ZZ-1-1"}})
	if code, body := get(resp.Header.Get("Location")); code != http.StatusOK || !strings.Contains(body, "Choose a seat on the map first.") {
		t.Errorf("the event page after a bad seat: %d, message shown: %v", code, strings.Contains(body, "Choose a seat on the map first."))
	}
	if resp := post("/user", url.Values{"user": {"mallory"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("switching to an unknown user: %d", resp.StatusCode)
	}
	if resp := post("/switches", url.Values{"switch": {"gravity"}, "on": {"1"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown switch: %d", resp.StatusCode)
	}
	if resp := post("/user", url.Values{"user": {"bob"}, "back": {"//evil.example/"}}); resp.Header.Get("Location") != "/" {
		t.Errorf("switching user redirected to %q, want / for a foreign back link", resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodPost, ta.url+"/switches", strings.NewReader("switch=payment&on=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	cross, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cross.Body.Close()
	if cross.StatusCode != http.StatusForbidden || ta.app.switches.PaymentDeclines.Load() {
		t.Errorf("a cross-site form post: %d, switch flipped: %v; want 403 and no change", cross.StatusCode, ta.app.switches.PaymentDeclines.Load())
	}
	in, err := checkIntegrity(t.Context(), ta.app.shop, "nebula-nights")
	if err != nil || in.SeatsSold != 0 || in.Claims != 0 || in.PaidOrders != 0 {
		t.Errorf("bad input wrote something: %+v (%v)", in, err)
	}
}

// TestLessonLinks checks that every scenario's code link lands on a
// function the source page anchors.
func TestLessonLinks(t *testing.T) {
	ta := startApp(t)
	lessons := []Lesson{bestLesson(BestResult{}), bestLesson(BestResult{Locked: true}), bestLesson(BestResult{Locked: true, Stalled: true}), transferLesson(), sagaLesson(SagaResult{}),
		sagaLesson(SagaResult{State: saga.State{Status: coord.SagaCompleted}, Confirmation: Confirmation{MessagingDown: true}}),
		{Code: "/code/storm.go#runStorm"}, {Code: "/code/activity.go#feedHandler"}, {Code: "/code/integrity.go#checkIntegrity"}}
	for _, st := range strategies {
		lessons = append(lessons, raceLesson(st))
	}
	for _, l := range lessons {
		page, anchor, _ := strings.Cut(l.Code, "#")
		resp, err := http.Get(ta.url + page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="`+anchor+`"`) {
			t.Errorf("%s: %d, anchor %q present: %v", l.Code, resp.StatusCode, anchor, strings.Contains(string(b), `id="`+anchor+`"`))
		}
	}
}
