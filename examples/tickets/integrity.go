package main

import (
	"context"
	"slices"
	"strings"
)

// Integrity reconciles one event: seats sold against paid orders against
// active tickets. Under the safe strategies every count agrees and no seat
// has two tickets; the naive strategy breaks it and the panel says where.
type Integrity struct {
	EventID      string
	SeatsSold    int
	SeatsHeld    int
	Claims       int
	PaidOrders   int
	SeatsOrdered int // seats in paid orders
	Tickets      int // active tickets
	DoubleSold   []DoubleSale
	Unticketed   []string // sold seats with no active ticket
}

// DoubleSale is a seat with more than one active ticket.
type DoubleSale struct {
	Seat   string
	Owners []string
}

// OK reports whether the event reconciles.
func (in Integrity) OK() bool {
	return len(in.DoubleSold) == 0 && len(in.Unticketed) == 0 &&
		in.SeatsSold == in.SeatsOrdered && in.SeatsSold == in.Tickets &&
		in.Claims == in.SeatsSold+in.SeatsHeld
}

// checkIntegrity reads an event's partition and reconciles it.
func checkIntegrity(ctx context.Context, shop *Shop, eventID string) (Integrity, error) {
	in := Integrity{EventID: eventID}
	seats, err := shop.seats(ctx, eventID)
	if err != nil {
		return in, err
	}
	orders, err := shop.orders(ctx, eventID)
	if err != nil {
		return in, err
	}
	tickets, err := shop.ticketsOf(ctx, eventID)
	if err != nil {
		return in, err
	}
	claims, err := shop.claims(ctx, eventID)
	if err != nil {
		return in, err
	}
	in.Claims = len(claims)
	for _, o := range orders {
		if o.Status == "paid" {
			in.PaidOrders++
			in.SeatsOrdered += len(o.Seats)
		}
	}
	owners := map[string][]string{}
	for _, t := range tickets {
		if t.Status == "active" {
			in.Tickets++
			owners[t.Seat] = append(owners[t.Seat], t.OwnerID)
		}
	}
	for _, s := range seats {
		switch s.Status {
		case statusSold:
			in.SeatsSold++
			if len(owners[s.Code]) == 0 {
				in.Unticketed = append(in.Unticketed, s.Code)
			}
		case statusHeld:
			in.SeatsHeld++
		}
		if o := owners[s.Code]; len(o) > 1 {
			slices.Sort(o)
			in.DoubleSold = append(in.DoubleSold, DoubleSale{Seat: s.Code, Owners: o})
		}
	}
	slices.SortFunc(in.DoubleSold, func(a, b DoubleSale) int { return strings.Compare(a.Seat, b.Seat) })
	return in, nil
}
