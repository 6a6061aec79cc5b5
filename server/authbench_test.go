package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkAuthenticate is the master-key check of a point read's
// Authorization header as the Go SDK sends it, at a fixed date, so that
// every run checks the same signature (instruction counts compare).
func BenchmarkAuthenticate(b *testing.B) {
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 2, 10, 7, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "GET", "docs", "dbs/db/colls/c/docs/r", date)
	r := httptest.NewRequest("GET", "/dbs/db/colls/c/docs/r", nil)
	r.Header["Authorization"] = []string{auth}
	r.Header["X-Ms-Date"] = []string{date}
	segs := splitPath(r.URL.Path)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.authenticate(r, segs, now); err != nil {
			b.Fatal(err)
		}
	}
}
