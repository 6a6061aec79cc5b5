package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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
	network   *faultAdmin // the network faults switch's rules
	runs      *runStore
	storms    stormRunner
	log       *slog.Logger
	pages     *pages
	bg        context.Context // the background workers' context, ended by Close
	stop      context.CancelFunc
	workers   sync.WaitGroup
}

// newApp connects to an endpoint with a key, opens the database, seeds the
// sample events that are missing, and starts the background workers. The
// buyers get an SDK client of their own, which names them in its user agent,
// made ready before the network faults switch can be turned on
// (readyClient).
func newApp(ctx context.Context, endpoint, key string, log *slog.Logger) (*App, error) {
	// The activity log starts at the app's start, not at the moment its
	// lease is created, so nothing done in between is missed.
	started := time.Now().Add(-time.Second)
	client, err := newClient(endpoint, key, "")
	if err != nil {
		return nil, err
	}
	buyers, err := readyClient(ctx, endpoint, key, buyerAgent)
	if err != nil {
		return nil, err
	}
	network, err := newFaultAdmin(endpoint, key)
	if err != nil {
		return nil, err
	}
	shop, err := openShop(ctx, client, buyers)
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
	box, err := outbox.New(ctx, shop.tickets)
	if err != nil {
		return nil, err
	}
	a := &App{
		shop:     shop,
		locker:   lock.New(locks),
		outbox:   box,
		notes:    notes,
		activity: newActivity(200),
		events:   sampleEvents(time.Now()),
		switches: &Switches{},
		network:  network,
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
	feedOpts := &changefeed.Options{StartFrom: changefeed.StartFromTime(started),
		PollInterval: 200 * time.Millisecond, AcquireInterval: time.Second}
	var feeds []*changefeed.Processor
	for name, monitored := range map[string]*azcosmos.ContainerClient{"activity": shop.tickets, "activity-payments": payments} {
		feed, err := changefeed.New(client, monitored, leases, name, a.feedHandler, feedOpts)
		if err != nil {
			return nil, err
		}
		feeds = append(feeds, feed)
	}
	// The outbox relay publishes the transfers' notifications and the
	// purchases' confirmations to the messaging service, retrying while it
	// is down.
	notesInbox, err := inbox.New(ctx, notes, "notifications", nil)
	if err != nil {
		return nil, err
	}
	a.messenger = &Messenger{notes: notes, inbox: notesInbox, switches: a.switches}
	a.relay, err = outbox.NewRelay(client, shop.tickets, leases, a.messenger, &outbox.RelayOptions{
		Processor:    &changefeed.Options{PollInterval: 200 * time.Millisecond, AcquireInterval: time.Second},
		RetryInitial: 100 * time.Millisecond, RetryMax: 2 * time.Second,
	})
	if err != nil {
		return nil, err
	}
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
