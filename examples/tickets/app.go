package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/outbox"
	"github.com/orrery-db/orrery/coord/saga"
)

// App is the site: its data access, its switches and the results of the
// scenarios run so far. Handlers are methods on it; there are no globals.
type App struct {
	shop      *Shop
	locker    *lock.Locker
	outbox    *outbox.Outbox
	relay     *outbox.Relay
	notes     *azcosmos.ContainerClient
	purchase  *Purchases
	messenger *Messenger
	activity  *Activity
	events    []Event
	switches  *Switches
	runs      *runStore
	storms    stormRunner
	log       *slog.Logger
	pages     *pages
	bg        context.Context // the background workers' context, ended by Close
	stop      context.CancelFunc
	workers   sync.WaitGroup
}

// newApp opens the database, seeds the sample events that are missing, and
// starts the background workers.
func newApp(ctx context.Context, client *azcosmos.Client, log *slog.Logger) (*App, error) {
	// The activity log starts at the app's start, not at the moment its
	// lease is created, so nothing done in between is missed.
	started := time.Now().Add(-time.Second)
	shop, err := openShop(ctx, client)
	if err != nil {
		return nil, err
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	locks, err := lock.CreateContainer(ctx, shop.db, "locks")
	if err != nil {
		return nil, err
	}
	leases, err := ensureContainer(ctx, shop.db, "leases", "/id", 0)
	if err != nil {
		return nil, err
	}
	notes, err := ensureContainer(ctx, shop.db, "notifications", "/userId", 0)
	if err != nil {
		return nil, err
	}
	sagas, err := saga.CreateContainer(ctx, shop.db, "sagas")
	if err != nil {
		return nil, err
	}
	payments, err := ensureContainer(ctx, shop.db, "payments", "/userId", 0)
	if err != nil {
		return nil, err
	}
	a := &App{
		shop:     shop,
		locker:   lock.New(locks),
		outbox:   outbox.New("eventId"),
		notes:    notes,
		activity: newActivity(200),
		events:   sampleEvents(time.Now()),
		switches: &Switches{},
		runs:     newRunStore(64),
		log:      log,
		pages:    pg,
	}
	if a.purchase, err = newPurchases(shop, sagas, payments, a.outbox, a.locker, a.switches); err != nil {
		return nil, err
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
	// The activity log is coord's change-feed processor over the tickets
	// container: every committed sale, ticket and refund becomes a line.
	host := ""
	if u, err := url.Parse(client.Endpoint()); err == nil {
		host = u.Host
	}
	feedOpts := func(name string) changefeed.Options {
		return changefeed.Options{Name: name, Host: host, StartFrom: changefeed.StartFromTime(started),
			PollInterval: 200 * time.Millisecond, AcquireInterval: time.Second}
	}
	feeds := []*changefeed.Processor{
		changefeed.New(shop.tickets, leases, a.feedHandler, feedOpts("activity")),
		changefeed.New(payments, leases, a.feedHandler, feedOpts("activity-payments")),
	}
	// The outbox relay publishes the transfers' notifications to the
	// messaging service, retrying while it is down.
	a.messenger = &Messenger{notes: notes, inbox: inbox.New(notes, "notifications", "userId"), switches: a.switches}
	a.relay = outbox.NewRelay(shop.tickets, leases, "eventId", a.messenger, outbox.RelayOptions{
		Processor:    changefeed.Options{Name: "outbox-relay", Host: host, PollInterval: 200 * time.Millisecond, AcquireInterval: time.Second},
		RetryInitial: 100 * time.Millisecond, RetryMax: 2 * time.Second,
	})
	a.bg, a.stop = context.WithCancel(context.Background())
	bg := a.bg
	for _, feed := range feeds {
		a.workers.Go(func() {
			if err := feed.Run(bg); err != nil && bg.Err() == nil {
				log.Error("the activity feed stopped", "error", err)
			}
		})
	}
	// Purchases a previous run of the app left halfway are finished or
	// rolled back from their recorded state.
	a.workers.Go(func() { a.purchase.recoverLoop(bg, 30*time.Second, log) })
	a.workers.Go(func() {
		if err := a.relay.Run(bg); err != nil && bg.Err() == nil {
			log.Error("the outbox relay stopped", "error", err)
		}
	})
	return a, nil
}

// Close stops the background workers and waits for them.
func (a *App) Close() {
	a.stop()
	a.workers.Wait()
}

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
