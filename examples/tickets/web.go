package main

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed web/templates/*.html
var templateFiles embed.FS

//go:embed web/static
var staticFiles embed.FS

// pages holds one parsed template set per page, each with the layout.
type pages struct {
	byName map[string]*template.Template
}

// templateFuncs are the functions the templates call.
var templateFuncs = template.FuncMap{
	"userName": userName,
	"money":    func(d int) string { return fmt.Sprintf("$%d", d) },
	"seatName": seatName,
	"seatList": seatList,
	"ms": func(d time.Duration) string {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	},
	"when":      func(t time.Time) string { return t.Format("Mon 2 Jan 2006, 15:04 MST") },
	"add":       func(a, b int) int { return a + b },
	"thousands": thousands,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"strategyTitle": func(st Strategy) string { return raceLesson(st).Title },
}

// loadPages parses the embedded templates.
func loadPages() (*pages, error) {
	names, err := fs.Glob(templateFiles, "web/templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		if strings.HasSuffix(n, "/layout.html") {
			continue
		}
		t, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(templateFiles, "web/templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		p.byName[strings.TrimSuffix(n[strings.LastIndex(n, "/")+1:], ".html")] = t
	}
	return p, nil
}

// seatName turns a seat code (FC-3-7) into what a person reads.
func seatName(code string) string {
	var sec string
	var row, n int
	parts := strings.SplitN(code, "-", 2)
	if len(parts) == 2 {
		if _, err := fmt.Sscanf(parts[1], "%d-%d", &row, &n); err == nil {
			sec = parts[0]
			for _, v := range []Venue{orionHall, stormArena} {
				for _, s := range v.Sections {
					if s.Code == sec {
						return fmt.Sprintf("%s, row %d, seat %d", s.Name, row, n)
					}
				}
			}
		}
	}
	return code
}

// view is what every page gets: the page's own data and the frame around it.
type view struct {
	Title    string
	Nav      string
	User     User
	Users    []User
	Switches switchView
	Path     string
	Data     any
}

// switchView is the state of the failure switches.
type switchView struct {
	Payment, Ticketing, Messaging bool
	Network                       bool
}

// render writes a page, or a plain error if the template fails.
func (a *App) render(w http.ResponseWriter, r *http.Request, status int, page, title, nav string, data any) {
	t, ok := a.pages.byName[page]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	v := view{
		Title: title, Nav: nav, User: currentUser(r), Users: sampleUsers, Data: data, Path: r.URL.RequestURI(),
		Switches: switchView{
			Payment:   a.switches.PaymentDeclines.Load(),
			Ticketing: a.switches.TicketingDown.Load(),
			Messaging: a.switches.MessagingDown.Load(),
			Network:   a.switches.NetworkFaults.Load(),
		},
	}
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		a.log.Error("rendering", "page", page, "error", err)
		http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

// fail shows an error page.
func (a *App) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	a.render(w, r, status, "error", "Something went wrong", "", msg)
}

// userCookie names the cookie holding the signed-in sample user.
const userCookie = "user"

// currentUser is the sample user the visitor switched to (Alice at first).
func currentUser(r *http.Request) User {
	if c, err := r.Cookie(userCookie); err == nil {
		for _, u := range sampleUsers {
			if u.ID == c.Value {
				return u
			}
		}
	}
	return sampleUsers[0]
}

// backTo redirects to a local path from a form, or to fallback.
func backTo(w http.ResponseWriter, r *http.Request, fallback string) {
	to := r.FormValue("back")
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") {
		to = fallback
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
