package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Document types in the tickets container.
const (
	typeEvent  = "event"
	typeSeat   = "seat"
	typeClaim  = "claim"
	typeOrder  = "order"
	typeTicket = "ticket"
)

// Seat statuses.
const (
	statusAvailable = "available"
	statusHeld      = "held"
	statusSold      = "sold"
)

// Seat is one seat of one event.
type Seat struct {
	ID          string           `json:"id"`
	Type        string           `json:"type"`
	EventID     string           `json:"eventId"`
	Code        string           `json:"code"`
	Section     string           `json:"section"`
	SectionName string           `json:"sectionName"`
	Row         int              `json:"row"`
	Number      int              `json:"number"`
	Price       int              `json:"price"`
	Rank        int              `json:"rank"`
	Status      string           `json:"status"`
	Holder      string           `json:"holder,omitempty"`
	OrderID     string           `json:"orderId,omitempty"`
	Fences      map[string]int64 `json:"fences,omitempty"`     // per lock name, the highest fencing token accepted (lock.FencesField)
	ReleasedBy  string           `json:"releasedBy,omitempty"` // the purchase saga that last released it
}

// Label is the seat as a person reads it.
func (s Seat) Label() string {
	return fmt.Sprintf("%s, row %d, seat %d", s.SectionName, s.Row, s.Number)
}

// Claim is the document whose id says "this seat is taken": creating it
// fails with 409 when another buyer created it first.
type Claim struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	EventID string `json:"eventId"`
	Seat    string `json:"seat"`
	UserID  string `json:"userId"`
	OrderID string `json:"orderId"`
}

// Order is a purchase of one or more seats.
type Order struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	EventID  string    `json:"eventId"`
	UserID   string    `json:"userId"`
	Seats    []string  `json:"seats"`
	Total    int       `json:"total"`
	Strategy string    `json:"strategy"`
	Status   string    `json:"status"`
	Created  time.Time `json:"created"`
	// SagaID is the purchase saga that wrote the order, if one did.
	SagaID string `json:"sagaId,omitempty"`
	// Confirmation is "queued" once the buyer's confirmation is in the
	// outbox (purchase saga orders only).
	Confirmation string `json:"confirmation,omitempty"`
}

// Ticket is what a buyer holds: one seat of one event.
type Ticket struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	EventID string    `json:"eventId"`
	Seat    string    `json:"seat"`
	OwnerID string    `json:"ownerId"`
	OrderID string    `json:"orderId"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
}

// eventDoc is an event's own document in its partition.
type eventDoc struct {
	Event
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Shop is the app's data access: the Cosmos containers and the queries the
// pages need. It holds no state of its own.
type Shop struct {
	db      *azcosmos.DatabaseClient
	tickets *azcosmos.ContainerClient
	// buyer is the tickets container through the buyers' own SDK client,
	// whose user agent names them: the purchases' reads and writes go
	// through it, so that the network faults switch reaches them only.
	buyer *azcosmos.ContainerClient
}

// databaseName is the database the app creates.
const databaseName = "cosmicticks"

// openShop creates the database and the tickets container if they are
// missing. buyers is the buyers' SDK client (client itself when nil).
func openShop(ctx context.Context, client, buyers *azcosmos.Client) (*Shop, error) {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: databaseName}, nil); err != nil && !isStatus(err, http.StatusConflict) {
		return nil, fmt.Errorf("creating database: %w", err)
	}
	db, err := client.NewDatabase(databaseName)
	if err != nil {
		return nil, err
	}
	s := &Shop{db: db}
	if s.tickets, err = ensureContainer(ctx, db, "tickets", "/eventId", 0); err != nil {
		return nil, err
	}
	s.buyer = s.tickets
	if buyers != nil {
		if s.buyer, err = buyers.NewContainer(databaseName, "tickets"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ensureContainer creates a container (with a default TTL when ttl is not 0)
// unless it exists, and returns its client.
func ensureContainer(ctx context.Context, db *azcosmos.DatabaseClient, name, pkPath string, ttl int32) (*azcosmos.ContainerClient, error) {
	props := azcosmos.ContainerProperties{
		ID:                     name,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}},
	}
	if ttl != 0 {
		props.DefaultTimeToLive = &ttl
	}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil && !isStatus(err, http.StatusConflict) {
		return nil, fmt.Errorf("creating container %s: %w", name, err)
	}
	return db.NewContainer(name)
}

// isStatus reports whether err is a Cosmos response with the given status.
func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// seedEvent writes an event and all its seats, available.
func (s *Shop) seedEvent(ctx context.Context, e Event, seats []Seat) error {
	if err := s.upsert(ctx, e.ID, eventDoc{Event: e, ID: "event", Type: typeEvent}); err != nil {
		return err
	}
	// 100 operations is the batch limit.
	for start := 0; start < len(seats); start += 100 {
		end := min(start+100, len(seats))
		b := s.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(e.ID))
		for _, seat := range seats[start:end] {
			body, err := json.Marshal(seat)
			if err != nil {
				return err
			}
			b.UpsertItem(body, nil)
		}
		if err := s.execute(ctx, b); err != nil {
			return fmt.Errorf("seeding %s: %w", e.ID, err)
		}
	}
	return nil
}

// clearEvent deletes every document of an event's partition.
func (s *Shop) clearEvent(ctx context.Context, eventID string) error {
	ids, err := queryAll[struct {
		ID string `json:"id"`
	}](ctx, s.tickets, eventID, "SELECT c.id FROM c", nil)
	if err != nil {
		return err
	}
	pk := azcosmos.NewPartitionKeyString(eventID)
	for _, d := range ids {
		if _, err := s.tickets.DeleteItem(ctx, pk, d.ID, nil); err != nil && !isStatus(err, http.StatusNotFound) {
			return err
		}
	}
	return nil
}

// upsert writes a document to an event's partition.
func (s *Shop) upsert(ctx context.Context, eventID string, doc any) error {
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = s.tickets.UpsertItem(ctx, azcosmos.NewPartitionKeyString(eventID), body, nil)
	return err
}

// create writes a new document to an event's partition; 409 if its id exists.
func (s *Shop) create(ctx context.Context, eventID string, doc any) error {
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = s.tickets.CreateItem(ctx, azcosmos.NewPartitionKeyString(eventID), body, nil)
	return err
}

// batchError is a transactional batch that did not commit: the status of
// the operation that failed it (the others answer 424).
type batchError struct {
	Index  int
	Status int
}

// Error says which operation rolled the batch back.
func (e *batchError) Error() string {
	return fmt.Sprintf("batch rolled back: operation %d answered %d %s", e.Index, e.Status, http.StatusText(e.Status))
}

// execute runs a transactional batch and turns a rolled-back batch into a
// *batchError.
func (s *Shop) execute(ctx context.Context, b azcosmos.TransactionalBatch) error {
	_, err := s.executeBatch(ctx, b)
	return err
}

// executeBatch is execute that also returns the response of a batch that
// committed (each operation's status and ETag).
func (s *Shop) executeBatch(ctx context.Context, b azcosmos.TransactionalBatch) (azcosmos.TransactionalBatchResponse, error) {
	return s.executeBatchOn(ctx, s.tickets, b)
}

// executeBatchOn is executeBatch through a client of the container (the
// app's or the buyers').
func (s *Shop) executeBatchOn(ctx context.Context, c *azcosmos.ContainerClient, b azcosmos.TransactionalBatch) (azcosmos.TransactionalBatchResponse, error) {
	resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		return resp, err
	}
	if resp.Success {
		return resp, nil
	}
	for i, r := range resp.OperationResults {
		if r.StatusCode != http.StatusFailedDependency {
			return resp, &batchError{Index: i, Status: int(r.StatusCode)}
		}
	}
	return resp, &batchError{Index: -1, Status: resp.RawResponse.StatusCode}
}

// batchStatus returns the status that rolled back a batch, or 0.
func batchStatus(err error) int {
	var be *batchError
	if errors.As(err, &be) {
		return be.Status
	}
	return 0
}

// readSeat reads a seat and its ETag.
func (s *Shop) readSeat(ctx context.Context, eventID, code string) (Seat, azcore.ETag, error) {
	return s.readSeatAs(ctx, s.tickets, eventID, code)
}

// readSeatAs reads a seat through a client of the container, again while
// the read fails with anything but 404 (readRetrying).
func (s *Shop) readSeatAs(ctx context.Context, c *azcosmos.ContainerClient, eventID, code string) (Seat, azcore.ETag, error) {
	resp, err := readRetrying(ctx, c, eventID, seatID(code))
	if err != nil {
		return Seat{}, "", err
	}
	var seat Seat
	err = json.Unmarshal(resp.Value, &seat)
	return seat, resp.ETag, err
}

// event reads an event.
func (s *Shop) event(ctx context.Context, eventID string) (Event, error) {
	resp, err := s.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(eventID), "event", nil)
	if err != nil {
		return Event{}, err
	}
	var d eventDoc
	err = json.Unmarshal(resp.Value, &d)
	return d.Event, err
}

// seats lists an event's seats in seat-map order.
func (s *Shop) seats(ctx context.Context, eventID string) ([]Seat, error) {
	seats, err := queryAll[Seat](ctx, s.tickets, eventID, "SELECT * FROM c WHERE c.type = 'seat'", nil)
	slices.SortFunc(seats, func(a, b Seat) int {
		return cmp.Or(cmp.Compare(a.Section, b.Section), cmp.Compare(a.Row, b.Row), cmp.Compare(a.Number, b.Number))
	})
	return seats, err
}

// orders lists an event's orders.
func (s *Shop) orders(ctx context.Context, eventID string) ([]Order, error) {
	return queryAll[Order](ctx, s.tickets, eventID, "SELECT * FROM c WHERE c.type = 'order'", nil)
}

// tickets lists an event's tickets.
func (s *Shop) ticketsOf(ctx context.Context, eventID string) ([]Ticket, error) {
	return queryAll[Ticket](ctx, s.tickets, eventID, "SELECT * FROM c WHERE c.type = 'ticket'", nil)
}

// claims lists an event's seat claims.
func (s *Shop) claims(ctx context.Context, eventID string) ([]Claim, error) {
	return queryAll[Claim](ctx, s.tickets, eventID, "SELECT * FROM c WHERE c.type = 'claim'", nil)
}

// queryAll runs a single-partition query and decodes every page.
func queryAll[T any](ctx context.Context, c *azcosmos.ContainerClient, pk, query string, params []azcosmos.QueryParameter) ([]T, error) {
	pager := c.NewQueryItemsPager(query, azcosmos.NewPartitionKeyString(pk), &azcosmos.QueryOptions{QueryParameters: params})
	var out []T
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Items {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}
