package main

// This file is the only one that imports the server: it starts an in-process
// Orrery on memory storage when no --endpoint is given. Everything else talks
// to Cosmos through the azcosmos SDK, so the app runs the same against Azure.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// embedded is an in-process Orrery serving on a loopback port.
type embedded struct {
	endpoint string
	key      string
	close    func()
}

// startEmbedded starts Orrery on memory storage at a free loopback port.
func startEmbedded(ctx context.Context) (*embedded, error) {
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		store.Close()
		return nil, err
	}
	srv, err := server.New(server.Config{
		Engine: eng,
		Keys:   server.Keys{Master: server.EmulatorKey},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		eng.Close()
		store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		store.Close()
		return nil, err
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	return &embedded{
		endpoint: "http://" + ln.Addr().String() + "/",
		key:      server.EmulatorKey,
		close: func() {
			hs.Shutdown(context.Background())
			eng.Close()
			store.Close()
		},
	}, nil
}
