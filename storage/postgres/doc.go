// Package postgres is the shared backend of package storage, on PostgreSQL:
// several processes (gateways), each with its own engine, open the same
// database and behave as one. Every key and value is a row of one table,
// orrery_kv(k bytea primary key, v bytea); bytea compares bytewise, so the
// table's primary-key order is the key order the other backends have.
//
// Besides storage.Store, a Store implements storage.Shared: a shared batch
// is a PostgreSQL transaction whose locks are transaction-scoped advisory
// locks on a hash of the lock's name, whose sequence number is the
// transaction's id (pg_current_xact_id, taken after its locks, so it is
// greater than that of every earlier holder of a conflicting lock), and the
// watermark is the oldest transaction id still running
// (pg_snapshot_xmin(pg_current_snapshot())), both with the server's
// timeline above the id (bits 48 and up): a standby promoted after its
// primary died may give out again ids the primary had given to
// transactions that rolled back, below a watermark read there, and the
// timeline, raised by the promotion, keeps every later number above every
// earlier one. A duty (Lead) is a session
// advisory lock held on a connection of its own: if that connection dies,
// the server frees the lock and another process takes the duty.
//
// A batch's writes wait in memory and go to the server at Commit in one
// pipelined round trip (BEGIN, one upsert and one delete over arrays, COMMIT).
// A shared batch's transaction is implicit instead: its round trips end
// with a Flush, so it stays open without a BEGIN, and its commit's round
// trip ends with a Sync, which commits it without a COMMIT (see
// sharedBatch).
// Iterators read pages of keys, so memory stays bounded on any range. An
// iterator of the store reads its first page and one more row in one
// statement; a range longer than that is read again from its start in a
// repeatable-read, read-only transaction begun in the same round trip, so
// that every page sees one snapshot, and the transaction's connection is
// given back when the last page is read or the iterator is closed.
// Snapshots are repeatable-read, read-only transactions on a connection
// each, held until Close. A shared batch reads pages in its own
// (read-committed) transaction.
//
// Point reads beyond a few round trips in flight wait and go together:
// one statement over all their keys, one round trip, one watermark (see
// readGroups).
//
// The statements of a point read and of a write's two round trips are
// prepared once per connection and then sent by reference, their Bind and
// Execute messages written by the store into one reused buffer and their
// answers read message by message, parameters and results in the binary
// format; their timeout is kept by the connection's deadline, the
// caller's context watched for a cancel (which closes the connection).
//
// The schema is versioned (table orrery_meta); Open creates or migrates it
// and refuses a database written by a newer version.
//
// It imports only package storage, pgx and the standard library.
package postgres
