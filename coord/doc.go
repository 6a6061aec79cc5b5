// Package coord is a coordination toolkit for services on Azure Cosmos DB
// for NoSQL (and anything that speaks its protocol, such as Orrery), built
// only on the official azcosmos SDK.
//
// Each primitive lives in its own package and guards against one failure:
//
//   - coord/lock: a lease per name with server-side expiry (TTL), fencing
//     tokens, renewal and a Lost signal, for short critical sections, and
//     fenced writes that refuse a holder whose lock has passed on.
//   - coord/saga: a multi-step workflow across partitions or services, with
//     recorded step outputs, retries, compensations run in reverse order and
//     resumption after a crash.
//   - coord/outbox, coord/inbox and coord/changefeed: reliable publication
//     after a commit, idempotent consumers, and a change-feed processor.
//
// This package holds what the primitives share: the one error every package
// returns for a transactional batch that did not commit (BatchError). The
// domain types live with their primitive (lock.Lease, saga.Status). It must
// not import any other package of this module, nor anything of the Orrery
// server: it works against Azure Cosmos DB exactly as against Orrery. See
// README.md in this directory for which primitive to use for which problem.
//
// The packages share one style. A constructor or call takes what it needs
// as positional arguments and its optional settings as a pointer to an
// options struct, last, nil meaning the defaults; nothing is configured by
// setting fields after construction. Partition keys are named by their
// path, as in azcosmos.PartitionKeyDefinition ("/customer", "/tenant/id"),
// and a package that owns a container exports its PartitionKeyPath and a
// CreateContainer that makes one fit for it.
package coord
