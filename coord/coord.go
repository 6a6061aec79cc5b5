// Package coord is a coordination toolkit for services on Azure Cosmos DB
// for NoSQL (and anything that speaks its protocol, such as Orrery), built
// only on the official azcosmos SDK.
//
// Each primitive lives in its own package and guards against one failure:
//
//   - coord/lock: a lease per name with server-side expiry (TTL), fencing
//     tokens, renewal and a Lost signal, for short critical sections.
//   - coord/saga: a multi-step workflow across partitions or services, with
//     compensations run in reverse order and resumption after a crash.
//   - coord/outbox, coord/inbox and coord/changefeed: reliable publication
//     after a commit, idempotent consumers, and a change-feed processor.
//
// This package holds the small domain types the primitives share. See
// README.md in this directory for which primitive to use for which problem.
package coord

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Lease is one holder's claim on a named lock, as last written to the
// database.
type Lease struct {
	// Name is the lock's name.
	Name string
	// Owner identifies the holder: the caller's owner name followed by a
	// random suffix unique to this acquisition, so a holder recognizes its
	// own write even when the reply to it was lost.
	Owner string
	// Token is the fencing token of this acquisition: strictly greater than
	// the token of every earlier acquisition of the same name.
	Token int64
	// ExpiresAt is when the database will expire the lease unless it is
	// renewed, computed from the server's timestamp of the last write and
	// the time to live (whole seconds, as the service counts them). The
	// service may expire it up to a second earlier than this, since its
	// timestamps are truncated to seconds.
	ExpiresAt time.Time
	// ETag is the ETag of the lease document's last write by this holder;
	// renewals and the release are conditional on it.
	ETag azcore.ETag
}

// SagaStatus is where a saga instance stands.
type SagaStatus string

const (
	// SagaRunning: actions are being executed in order.
	SagaRunning SagaStatus = "running"
	// SagaCompensating: an action failed; the completed steps are being
	// compensated in reverse order.
	SagaCompensating SagaStatus = "compensating"
	// SagaCompleted: every action ran. Terminal.
	SagaCompleted SagaStatus = "completed"
	// SagaCompensated: every step that ran was compensated. Terminal.
	SagaCompensated SagaStatus = "compensated"
	// SagaCompensationFailed: a compensation kept failing; the saga stopped
	// with the failing step recorded, for an operator or a later Resume.
	SagaCompensationFailed SagaStatus = "compensation_failed"
)

// Terminal reports whether no further transition will happen on its own.
// A saga whose compensation failed is terminal until it is resumed.
func (s SagaStatus) Terminal() bool {
	return s == SagaCompleted || s == SagaCompensated || s == SagaCompensationFailed
}
