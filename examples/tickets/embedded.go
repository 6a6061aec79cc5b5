package main

// This file is the only one that imports the server: it starts an in-process
// Orrery on memory storage when no --endpoint is given. Everything else talks
// to Cosmos through the azcosmos SDK, so the app runs the same against Azure.

import (
	"context"

	"github.com/orrery-db/orrery/instance"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// embedded is an in-process Orrery serving on a loopback port.
type embedded struct {
	endpoint string
	key      string
	close    func()
}

// startEmbedded starts Orrery on memory storage at a free loopback port,
// as `orrery serve --memory` does.
func startEmbedded(ctx context.Context) (*embedded, error) {
	inst, err := instance.Start(ctx, instance.Config{Store: memory.New()})
	if err != nil {
		return nil, err
	}
	return &embedded{
		endpoint: inst.Endpoint(),
		key:      server.EmulatorKey,
		close: func() {
			inst.Shutdown(context.Background())
		},
	}, nil
}
