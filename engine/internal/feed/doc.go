// Package feed is the engine's change feed: the records of the
// all-versions-and-deletes log and their wire format, the scans that page
// through a container's latest-version index and its change log, the
// continuation (ETag) a page ends with, and the chunked reads of the items
// an index of positions names, which the read feed shares.
//
// A change feed page is read from one snapshot, up to a watermark below
// which every write has finished. A page ends only between sequence
// numbers: its continuation says "everything at or below this sequence
// number is done", so the records one transaction wrote are never split
// across pages. Bounds on the records a page passes over and reads keep a
// narrowly scoped reader's work per request bounded: it answers with what
// it found and resumes from where the scan stopped.
//
// The package knows a container by its RID and partition key paths only
// (Container), storage through the storage interfaces, keys through
// internal/keys and JSON strings through internal/jsondoc. It never
// imports the engine: the engine decodes items, decides expiry and scope,
// and wraps what this package returns in its public requests and results.
package feed
