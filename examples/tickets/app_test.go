package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// testApp is the site running in process on an embedded Orrery.
type testApp struct {
	app *App
	url string
}

// startApp starts the embedded Orrery and the site on free loopback ports;
// both stop when the test ends.
func startApp(t testing.TB) *testApp {
	ctx := t.Context()
	t.Helper()
	emb, err := startEmbedded(ctx)
	if err != nil {
		t.Fatalf("starting the embedded Orrery: %v", err)
	}
	t.Cleanup(emb.close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app, err := newApp(ctx, emb.endpoint, emb.key, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatalf("starting the app: %v", err)
	}
	t.Cleanup(app.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: app.routes()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return &testApp{app: app, url: "http://" + ln.Addr().String()}
}
