// Package changefeed is a change feed processor for the Go SDK (azcosmos),
// which has none: it delivers every change of a container to a handler,
// sharing the work among any number of instances, and resumes where it left
// off after restarts, crashes and partition splits. It is built on the
// azcosmos SDK (and Prometheus for its metrics) and must not import the
// other coord packages nor anything of the Orrery server.
//
// # Leases
//
// The work is cut by feed range (physical partition key range). Each range
// has a lease document in a lease container, in the .NET processor's shape
// (version 1 "EPK" leases: id "<name><host>_<dbRid>_<collRid>..<min>-<max>",
// LeaseToken, FeedRange, Owner, ContinuationToken, timestamp, properties,
// Mode), so .NET and Java processors and the tools that read their lease
// containers understand it; leases written by them (version 0 with a
// FeedRange, Java's "feedRange" and base64 continuation state) are read. A
// shared lease container must be partitioned by /id; /partitionKey works for
// Go and .NET. The store is initialized as theirs is: a ".lock" document
// guards the creation of one lease per feed range, then ".info" marks the
// store ready. Every write of a lease is an If-Match on its ETag.
//
// The host in lease ids is derived as the .NET processor derives it: the
// host of the endpoint of the client the monitored container was made from
// (System.Uri.Host: lower case, no port; HostOf), and the database's
// resource id is the database's own (from the container's self link). So a
// Go instance and a .NET instance of one processor, configured with the
// same endpoint, share one set of leases without any setting. A processor
// that makes a new store next to another of its name for the same container
// (a host mismatch: two fleets each processing every change) says so
// through OnError.
//
// # Balancing
//
// Every AcquireInterval an instance lists the leases and applies the .NET
// EqualPartitionsBalancingStrategy: each live instance aims at
// ceil(leases/instances); below that it takes expired or released leases,
// and otherwise steals one lease per round from the busiest instance, so a
// fleet converges to even shares without leases moving back and forth. A
// lease is expired when released, when its timestamp is older than
// Expiration, or when its ETag has not changed for Expiration by the
// observing instance's own clock (so clock skew cannot keep a dead owner's
// lease). Holders renew every RenewInterval; an instance that loses a lease
// (a renewal or checkpoint finds another owner) stops reading it.
//
// # Delivery
//
// OnLeaseAcquired and OnLeaseReleased tell when this instance starts and
// stops processing a lease; OnError is told of every error the processor
// recovers from by retrying.
//
// A lease's range is read page by page; after the handler returns nil the
// page's ETag is checkpointed in the lease; on an error the page is read
// again after a backoff. Delivery is at least once, in order per partition
// key: a page may be delivered again when a lease moves between handling and
// checkpoint, or after a crash. Leases with no checkpoint start from the
// beginning, from now (pinned when the lease is created) or from a time
// (Options.StartFrom).
//
// With Options.ManualCheckpoint the handler checkpoints (Batch.Checkpoint,
// from any goroutine, after the handler returned if it likes) and the
// processor reads on meanwhile; a handler error, the lease moving or a crash
// resumes from the last checkpoint, and a split gives the children the
// parent's last checkpoint.
//
// In AllVersionsAndDeletes mode the processor reads the feed with the
// service's all-versions headers (the SDK has no such mode; they ride on
// the request's context) and delivers one record per create, replace and
// delete (Batch.Versions decodes them). Leases record their mode ("Mode":
// "Full-Fidelity Feed"), and a processor refuses leases of the other mode.
//
// # Splits
//
// When a range splits, the service answers 410 with substatus 1002
// (partition key range gone) for it. The SDK then re-reads the partition key
// ranges and continues each child from the parent's position; the processor
// sees the children in the continuation it gets back and replaces the
// parent's lease by one lease per child (created only if absent), each at
// its own position, before deleting the parent's lease with If-Match. If the
// SDK gives up on the 410 itself, the processor re-reads the feed ranges and
// cuts the lease at the children's bounds, each child resuming from the
// parent's checkpoint. Every partition key lives in exactly one child and
// the child continues from where the parent was, so nothing is skipped or
// reordered per key; a crash in the middle only repeats changes.
//
// # Estimator
//
// Estimator reads each lease's range from its checkpoint to the end without
// writing, and counts: the exact number of changes still to deliver (the
// .NET estimator's LSN difference is cheaper but also counts writes of other
// ranges and superseded versions). Its cost is a read of the backlog.
//
// # Metrics
//
// NewMetrics registers coord_changefeed_leases_owned,
// coord_changefeed_estimated_lag (per lease, refreshed every LagInterval),
// coord_changefeed_batches_handled_total, coord_changefeed_batches_failed_total
// and coord_changefeed_changes_delivered_total, labelled by processor name.
package changefeed
