package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// App is the site: its data access, its switches and the results of the
// scenarios run so far. Handlers are methods on it; there are no globals.
type App struct {
	shop     *Shop
	events   []Event
	switches *Switches
	runs     *runStore
	log      *slog.Logger
	pages    *pages
	stop     context.CancelFunc
}

// newApp opens the database, seeds the sample events that are missing, and
// starts the background workers.
func newApp(ctx context.Context, client *azcosmos.Client, log *slog.Logger) (*App, error) {
	shop, err := openShop(ctx, client)
	if err != nil {
		return nil, err
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	a := &App{
		shop:     shop,
		events:   sampleEvents(time.Now()),
		switches: &Switches{},
		runs:     newRunStore(64),
		log:      log,
		pages:    pg,
	}
	for _, e := range a.events {
		if _, err := shop.event(ctx, e.ID); err == nil {
			continue
		} else if !isStatus(err, http.StatusNotFound) {
			return nil, err
		}
		if err := shop.seedEvent(ctx, e, seatsOf(e.ID, orionHall)); err != nil {
			return nil, err
		}
	}
	_, a.stop = context.WithCancel(context.Background())
	return a, nil
}

// Close stops the background workers.
func (a *App) Close() { a.stop() }

// resetEvent puts an event back to all seats available.
func (a *App) resetEvent(ctx context.Context, e Event) error {
	if err := a.shop.clearEvent(ctx, e.ID); err != nil {
		return err
	}
	return a.shop.seedEvent(ctx, e, seatsOf(e.ID, orionHall))
}

// eventByID finds a sample event.
func (a *App) eventByID(id string) (Event, error) {
	for _, e := range a.events {
		if e.ID == id {
			return e, nil
		}
	}
	return Event{}, fmt.Errorf("no event %q", id)
}
