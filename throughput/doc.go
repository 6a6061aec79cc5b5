// Package throughput enforces provisioned throughput as the service does,
// for servers started to (orrery serve --enforce-throughput): each
// container's RU/s, or its database's when the database shares its
// throughput, is a budget per second divided evenly over the physical
// partitions (partition key ranges) that serve it; a request to a partition
// whose budget is spent is refused with a retry-after of when it has some
// again, and a request admitted pays the charge the engine reports.
//
// Manual and autoscale offers are read from the engine (an autoscale offer
// is held to its maximum, which the service scales to at once). It imports
// the engine's public API only.
package throughput
