package main

import (
	"fmt"
	"time"
)

// Event is a show on sale. Each event is one logical partition (partition key
// /eventId) of the tickets container: its seats, claims, orders and tickets
// share it, so one transactional batch can sell a seat and write the order.
type Event struct {
	ID     string    `json:"eventId"`
	Name   string    `json:"name"`
	Artist string    `json:"artist"`
	Venue  string    `json:"venue"`
	Date   time.Time `json:"date"`
	Blurb  string    `json:"blurb"`
}

// Section is a block of seats sharing a price.
type Section struct {
	Code  string // short code used in seat codes, e.g. "FC"
	Name  string // "Floor Center"
	Rows  int
	Seats int // seats per row
	Price int // whole dollars
	Order int // lower is better: used by best available
}

// Venue is the seat map every sample event uses.
type Venue struct {
	Name     string
	Sections []Section
}

// orionHall is the sample venue: three floor sections and a balcony.
var orionHall = Venue{
	Name: "Orion Hall",
	Sections: []Section{
		{Code: "FL", Name: "Floor Left", Rows: 4, Seats: 6, Price: 95, Order: 1},
		{Code: "FC", Name: "Floor Center", Rows: 4, Seats: 10, Price: 120, Order: 0},
		{Code: "FR", Name: "Floor Right", Rows: 4, Seats: 6, Price: 95, Order: 1},
		{Code: "BA", Name: "Balcony", Rows: 3, Seats: 14, Price: 55, Order: 2},
	},
}

// sampleEvents are the shows the site sells.
func sampleEvents(now time.Time) []Event {
	day := now.UTC().Truncate(24 * time.Hour)
	return []Event{
		{ID: "nebula-nights", Name: "Nebula Nights", Artist: "The Aurora Quartet", Venue: orionHall.Name,
			Date: day.Add(9*24*time.Hour + 20*time.Hour), Blurb: "Strings and synths under a planetarium dome."},
		{ID: "cosmic-drift", Name: "Cosmic Drift Live", Artist: "Perihelion", Venue: orionHall.Name,
			Date: day.Add(16*24*time.Hour + 21*time.Hour), Blurb: "Ambient electronica, three hours, no intermission."},
		{ID: "starlight-symphony", Name: "Starlight Symphony", Artist: "Orion Philharmonic", Venue: orionHall.Name,
			Date: day.Add(23*24*time.Hour + 19*time.Hour + 30*time.Minute), Blurb: "Holst's The Planets, performed in full."},
	}
}

// seatsOf lays out the venue's seats for one event. A seat's rank orders
// best available: better section first, then front rows, then the middle.
func seatsOf(eventID string, v Venue) []Seat {
	var seats []Seat
	for _, s := range v.Sections {
		for r := 1; r <= s.Rows; r++ {
			for n := 1; n <= s.Seats; n++ {
				mid := float64(s.Seats+1) / 2
				off := float64(n) - mid
				if off < 0 {
					off = -off
				}
				seats = append(seats, Seat{
					ID: seatID(seatCode(s.Code, r, n)), Type: typeSeat, EventID: eventID,
					Code: seatCode(s.Code, r, n), Section: s.Code, SectionName: s.Name,
					Row: r, Number: n, Price: s.Price,
					Rank:   s.Order*10000 + r*100 + int(off*2),
					Status: statusAvailable,
				})
			}
		}
	}
	return seats
}

// seatCode names a seat: section, row, number.
func seatCode(section string, row, n int) string { return fmt.Sprintf("%s-%d-%d", section, row, n) }

// seatID is the id of a seat's document.
func seatID(code string) string { return "seat-" + code }

// claimID is the create-only id that stands for "this seat is taken".
func claimID(code string) string { return "claim-" + code }

// User is someone the visitor can switch to.
type User struct {
	ID   string
	Name string
}

// sampleUsers are the people of the demo.
var sampleUsers = []User{
	{ID: "alice", Name: "Alice"}, {ID: "bob", Name: "Bob"}, {ID: "carol", Name: "Carol"},
	{ID: "dave", Name: "Dave"}, {ID: "erin", Name: "Erin"}, {ID: "frank", Name: "Frank"},
}

// userName returns the display name of a user id.
func userName(id string) string {
	for _, u := range sampleUsers {
		if u.ID == id {
			return u.Name
		}
	}
	return id
}
