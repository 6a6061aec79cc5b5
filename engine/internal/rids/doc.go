// Package rids makes and reads resource ids (RIDs), the service's own names
// for databases, containers, items, scripts, users, permissions and offers.
// A RID is a byte string that embeds its parent's, written as base64 with
// '-' in place of '/' (so that it fits in a URL path segment): a database 4
// bytes, a container or a user 8 (its database's and 4 random bytes), an
// item, a script or a permission 16 (its container's or user's and an 8-byte
// suffix), an offer 3 random bytes. Because a child's RID starts with its
// parent's, keys that name resources by RID sort a parent's children
// together; internal/keys relies on it.
package rids
