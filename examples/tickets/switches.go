package main

import "sync/atomic"

// Switches are the failure switches a visitor flips to break a participant
// of the purchase: the payment provider, the ticketing system, messaging.
type Switches struct {
	PaymentDeclines atomic.Bool
	TicketingDown   atomic.Bool
	MessagingDown   atomic.Bool
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
