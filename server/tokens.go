package server

import (
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
// expiry; the permission it names is looked up by the caller. A token is
// decoded on the stack and its MAC computed in the master key's reused
// hash state: checking one allocates only the permission's RID.
func (k *keyRing) verifyResourceToken(sig []byte, now time.Time) (*resourceToken, *engine.Error) {
	// A token is 75 characters of base64 (56 bytes); longer ones (line
	// breaks, which the decoder skips) take DecodeString's way.
	var buf [tokenLen + 8]byte
	b, err := decodeBase64(base64.RawURLEncoding, buf[:], sig)
	if err != nil || len(b) != tokenLen {
		return nil, unauthorized("The resource token in the authorization header is malformed: it was not issued by this account.")
	}
	payload, mac := b[:tokenPayloadLen], b[tokenPayloadLen:]
	if !k.master.signsPrefixed(mac, resourceTokenDomain, payload) {
		return nil, unauthorized("The resource token in the authorization header has an invalid signature: it was not issued by this account, or was altered.")
	}
	expiry := time.Unix(int64(binary.BigEndian.Uint64(payload[permissionRIDLen:])), 0)
	if !now.Before(expiry) {
		return nil, unauthorized(fmt.Sprintf("The resource token has expired at %s (the server's clock reads %s): read the permission again for a new token.",
			expiry.UTC().Format(http.TimeFormat), now.UTC().Format(http.TimeFormat)))
	}
	// The RID as the engine writes it: base64 with '-' for '/'.
	var rid [24]byte // base64.StdEncoding.EncodedLen(permissionRIDLen)
	base64.StdEncoding.Encode(rid[:], payload[:permissionRIDLen])
	for i, c := range rid {
		if c == '/' {
			rid[i] = '-'
		}
	}
	return &resourceToken{permissionRID: string(rid[:]), expiry: expiry}, nil
}

// tokenLifetime parses x-ms-documentdb-expiry-seconds: how long the tokens
// a permission request returns are valid.
func tokenLifetime(h http.Header) (time.Duration, error) {
	v := header(h, "X-Ms-Documentdb-Expiry-Seconds")
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
