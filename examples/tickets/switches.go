package main

import "sync/atomic"

// Switches are the failure switches a visitor flips to break a participant
// of the purchase: the payment provider, the ticketing system, messaging;
// and the network between the buyers and the database (network.go).
type Switches struct {
	PaymentDeclines atomic.Bool
	TicketingDown   atomic.Bool
	MessagingDown   atomic.Bool
	// NetworkFaults is on while the network faults rules are installed.
	NetworkFaults atomic.Bool
}

// byName returns the switch a form names, or nil.
func (s *Switches) byName(name string) *atomic.Bool {
	switch name {
	case "payment":
		return &s.PaymentDeclines
	case "ticketing":
		return &s.TicketingDown
	case "messaging":
		return &s.MessagingDown
	}
	return nil
}
