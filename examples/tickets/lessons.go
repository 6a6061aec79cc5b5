package main

// Lesson is what a scenario teaches: what went wrong, what fixed it, and
// where the code is.
type Lesson struct {
	Title   string
	Problem string // one sentence: what goes wrong without the tool
	Fix     string // one sentence: which tool fixes it and how
	Code    string // link to the code that does it
	Tool    string
}

// raceLesson explains a strategy's race.
func raceLesson(st Strategy) Lesson {
	switch st {
	case StrategyNaive:
		return Lesson{Title: "Naive read, then write", Tool: "none",
			Problem: "Every buyer read the seat as available and then wrote it as sold: the last write silently won, and more than one buyer holds a ticket for one seat.",
			Fix:     "Nothing stops it here: pick the ETag or the batch strategy to see the fix.",
			Code:    "/code/buy.go#buyNaive"}
	case StrategyETag:
		return Lesson{Title: "ETag conditional write", Tool: "ETag (If-Match)",
			Problem: "Every buyer read the seat as available, so their writes raced exactly as in the naive case.",
			Fix:     "Each write carried the ETag it had read; the first one changed the seat, so Cosmos refused every later one with 412 and exactly one buyer got the seat.",
			Code:    "/code/buy.go#buyETag"}
	default:
		return Lesson{Title: "Create-only seat id in a transactional batch", Tool: "transactional batch",
			Problem: "Every buyer tried to sell the same seat at the same moment, without reading it first.",
			Fix:     "The seat's claim has the seat as its id and can be created once: the first batch (claim, order, ticket) committed, every other one got 409 and rolled back whole.",
			Code:    "/code/buy.go#buyBatch"}
	}
}

// bestLesson explains a best-available race.
func bestLesson(r BestResult) Lesson {
	if r.Stalled {
		return Lesson{Title: "A lock holder that stalls", Tool: "coord/lock fencing tokens",
			Problem: "The first buyer held the lock, then stalled past its lease; the second buyer rightly got the lock and bought the seats, and the first woke up still believing it held the lock.",
			Fix:     "Every seat write carries the lock's fencing token and a seat refuses a token older than the last it accepted (lock.FencedPatch), so the stale buyer's writes were rejected instead of overwriting the sale.",
			Code:    "/code/best.go#bestWithStall"}
	}
	if !r.Locked {
		return Lesson{Title: "Best available without a lock", Tool: "none",
			Problem: "Every buyer looked at the free seats before any of them bought, so they all chose the same best seats and sold them to each other twice over.",
			Fix:     "Nothing stops it here: an ETag guards one document, but choosing seats is a read of many; switch the lock on.",
			Code:    "/code/best.go#sellUnlocked"}
	}
	return Lesson{Title: "Best available with a distributed lock", Tool: "coord/lock",
		Problem: "Every buyer wanted the best seats at the same moment, and choosing them reads the whole seat map.",
		Fix:     "Choosing and selling ran inside a coord/lock lease per show, one buyer at a time; each seat write carried the lock's fencing token, so no buyer's seats overlap.",
		Code:    "/code/best.go#sellLocked"}
}

// transferLesson explains the transfer through the outbox.
func transferLesson() Lesson {
	return Lesson{Title: "Transfer through the outbox", Tool: "coord/outbox",
		Problem: "Saving the transfer and then calling the messaging service leaves a gap: if messaging is down or the process dies in between, the ticket moves and nobody is told.",
		Fix:     "The new owner and both notifications are one transactional batch (coord/outbox); a relay on the change feed publishes them, retrying until messaging is back, and coord/inbox delivers each one once.",
		Code:    "/code/transfer.go#transferTicket"}
}

// sagaLesson explains how a purchase saga ended.
func sagaLesson(r SagaResult) Lesson {
	l := Lesson{Title: "Purchase saga", Tool: "coord/saga", Code: "/code/purchase.go#newPurchases"}
	switch {
	case r.Completed() && r.Confirmation.MessagingDown:
		l.Problem = "Messaging is down, but a confirmation that cannot be sent yet is no reason to refund a paid purchase, and sending it straight after the saga would lose it."
		l.Fix = "The saga completed (seats held, card charged, tickets issued); then the confirmation was committed to coord/outbox in one batch with the order, and the relay sends it when messaging is back."
		l.Code = "/code/purchase.go#queueConfirmation"
	case r.Completed():
		l.Problem = "A purchase spans three services (seats, payments, ticketing) and no transaction spans them; the confirmation must not be lost after it."
		l.Fix = "coord/saga recorded each step as it completed, in one ETag-guarded document, so a crash would resume where it stopped; the confirmation went to coord/outbox with the order."
	default:
		l.Problem = "The step “" + r.Failed + "” failed after earlier steps had already changed other services."
		l.Fix = "coord/saga recorded the compensations to run before running any, then undid the completed steps (and the failed one, which may have half happened) in reverse order; each compensation decides from its participant's record what there is to undo."
	}
	return l
}
