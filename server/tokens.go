package server

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// Resource tokens are minted, not stored: a token carries the RID of the
// permission it was issued for (which embeds the RIDs of its database and
// user), its expiry, and an HMAC-SHA256 of both under the master key. The
// server verifies the HMAC and the expiry, then looks the permission up, so
// deleting the permission (or its user or database) revokes its tokens.

const (
	// resourceTokenPrefix starts every resource token, as the service's do.
	resourceTokenPrefix = "type=resource&ver=1.0&sig="
	// resourceTokenDomain separates token signatures from request
	// signatures, whose payloads start with an HTTP verb.
	resourceTokenDomain = "orrery resource token\n"
	permissionRIDLen    = 16
	tokenPayloadLen     = permissionRIDLen + 8
	tokenLen            = tokenPayloadLen + 32

	defaultTokenLifetime = 3600
	minTokenLifetime     = 10
	maxTokenLifetime     = 18000
)

// resourceToken is a verified token's content.
type resourceToken struct {
	permissionRID string
	expiry        time.Time
}

// mintResourceToken returns the token of a permission valid until expiry.
func (k *keyRing) mintResourceToken(permissionRID string, expiry time.Time) (string, error) {
	rid, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(permissionRID, "-", "/"))
	if err != nil || len(rid) != permissionRIDLen {
		return "", fmt.Errorf("server: %q is not the RID of a permission", permissionRID)
	}
	b := make([]byte, 0, tokenLen)
	b = append(b, rid...)
	b = binary.BigEndian.AppendUint64(b, uint64(expiry.Unix()))
	b = append(b, k.master.sign(resourceTokenDomain+string(b))...)
	return resourceTokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// verifyResourceToken checks a token's signature (the part after sig=) and
// expiry; the permission it names is looked up by the caller.
func (k *keyRing) verifyResourceToken(sig string, now time.Time) (*resourceToken, *engine.Error) {
	b, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(b) != tokenLen {
		return nil, unauthorized("The resource token in the authorization header is malformed: it was not issued by this account.")
	}
	payload, mac := b[:tokenPayloadLen], b[tokenPayloadLen:]
	if !hmac.Equal(mac, k.master.sign(resourceTokenDomain+string(payload))) {
		return nil, unauthorized("The resource token in the authorization header has an invalid signature: it was not issued by this account, or was altered.")
	}
	expiry := time.Unix(int64(binary.BigEndian.Uint64(payload[permissionRIDLen:])), 0)
	if !now.Before(expiry) {
		return nil, unauthorized(fmt.Sprintf("The resource token has expired at %s (the server's clock reads %s): read the permission again for a new token.",
			expiry.UTC().Format(http.TimeFormat), now.UTC().Format(http.TimeFormat)))
	}
	rid := strings.ReplaceAll(base64.StdEncoding.EncodeToString(payload[:permissionRIDLen]), "/", "-")
	return &resourceToken{permissionRID: rid, expiry: expiry}, nil
}

// tokenLifetime parses x-ms-documentdb-expiry-seconds: how long the tokens
// a permission request returns are valid.
func tokenLifetime(h http.Header) (time.Duration, error) {
	v := h.Get("x-ms-documentdb-expiry-seconds")
	if v == "" {
		return defaultTokenLifetime * time.Second, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < minTokenLifetime || n > maxTokenLifetime {
		return 0, badRequest("The x-ms-documentdb-expiry-seconds header %q is invalid: a resource token's validity must be a whole number of seconds from %d to %d.",
			v, minTokenLifetime, maxTokenLifetime)
	}
	return time.Duration(n) * time.Second, nil
}

// insufficientPermissions is the 403 of a resource token that does not
// cover the request.
func insufficientPermissions(why string) *engine.Error {
	return engine.Forbidden("Insufficient permissions provided in the authorization header for the corresponding request: %s", why)
}

// authorizeToken checks that the permission behind a verified resource
// token still exists and covers the request: its resource or one below it,
// a verb its mode allows, and its partition key when it names one. It
// returns the access the request then has.
func (s *Server) authorizeToken(r *request, tok *resourceToken) (access, *engine.Error) {
	perm, err := s.eng.PermissionByRID(tok.permissionRID)
	if err != nil {
		if engine.StatusOf(err) == http.StatusNotFound {
			return accessNone, unauthorized("The resource token's permission no longer exists: it was deleted, or its user or database was.")
		}
		return accessNone, &engine.Error{Status: 500, Code: "InternalServerError", Message: err.Error()}
	}
	reading := !r.isWrite()
	if perm.Mode != engine.PermissionAll && !reading {
		return accessNone, insufficientPermissions(fmt.Sprintf("the permission %q grants Read access to %q, and this request writes.", perm.ID, perm.Link))
	}
	granted := accessRead
	if perm.Mode == engine.PermissionAll {
		granted = accessAll
	}
	if len(r.segs) == 0 {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return accessNone, insufficientPermissions("a resource token can read the database account, not change it.")
		}
		return granted, nil
	}
	if len(r.segs) > 2 && r.segs[0] == "dbs" && r.segs[2] == "users" {
		return accessNone, insufficientPermissions("users and permissions are managed with the master key, not a resource token.")
	}
	permSegs, perr := engine.ParseResourceLink(perm.Link)
	if perr != nil {
		return accessNone, insufficientPermissions(perr.Message)
	}
	if !linkCovers(s.eng.ResolveLink(permSegs), s.eng.ResolveLink(r.segs)) {
		return accessNone, insufficientPermissions(fmt.Sprintf("the permission %q covers %q, not %q.", perm.ID, perm.Link, strings.Join(r.segs, "/")))
	}
	if perm.HasPartitionKey && partitionScoped(r) {
		pk, has, err := r.partitionKey()
		if err != nil {
			return accessNone, engine.BadRequest("%v", err)
		}
		if !has || !pk.Equal(perm.PartitionKey) {
			return accessNone, insufficientPermissions(fmt.Sprintf("the permission %q covers the partition key %s only.", perm.ID, perm.PartitionKey))
		}
	}
	return granted, nil
}

// partitionScoped reports whether a request reaches into one logical
// partition: item operations and feeds, and stored procedure executions.
func partitionScoped(r *request) bool {
	switch {
	case len(r.segs) < 5:
		return false
	case r.segs[4] == "docs":
		return true
	}
	return r.segs[4] == "sprocs" && len(r.segs) == 6 && r.Method == http.MethodPost
}

// linkCovers reports whether the request path req addresses the granted
// resource or something below it. Both are resolved to RIDs where they
// name databases and containers.
func linkCovers(granted, req []string) bool {
	if len(req) < len(granted) {
		return false
	}
	for i, s := range granted {
		if req[i] != s {
			return false
		}
	}
	return true
}
