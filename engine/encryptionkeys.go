package engine

import (
	"context"
	"encoding/base64"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
)

// Client encryption keys (/dbs/{db}/clientencryptionkeys) are the data
// encryption keys of Always Encrypted, wrapped by a key encryption key the
// client holds (in a key vault): the service stores them for the clients
// and never sees them unwrapped. Encryption is the SDKs'; what is stored
// here is opaque. A key can be created, read, listed, queried and replaced
// (a rewrap, under If-Match); the service has no delete: a key lives as
// long as its database.

// encryptionKeysOf returns the client encryption keys of a database. A
// key's RID is its database's and 8 bytes from the sequence number that
// created it.
func encryptionKeysOf(db *Database) childSet {
	return childSet{kind: "client encryption key", prefix: keys.EncryptionKeyPrefix(db.rid),
		self: "dbs/" + db.RID + "/clientencryptionkeys/", ridLen: 12, salt: 0xFFFD,
		newRID: func(_ context.Context, lsn uint64) ([]byte, error) { return rids.Child(db.rid, lsn), nil }}
}

// decodeEncryptionKey parses and checks the body of a client encryption
// key's create or replace.
func decodeEncryptionKey(body []byte) (map[string]any, error) {
	props, _, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	if alg, _ := props["encryptionAlgorithm"].(string); alg != EncryptionAlgorithm {
		return nil, BadRequest("The client encryption key's encryptionAlgorithm %q is invalid: the supported algorithm is %s.", props["encryptionAlgorithm"], EncryptionAlgorithm)
	}
	wrapped, ok := props["wrappedDataEncryptionKey"].(string)
	if !ok || wrapped == "" {
		return nil, BadRequest("The input content is invalid because the required property, wrappedDataEncryptionKey, is missing: it must be the wrapped key in base64.")
	}
	if _, err := base64.StdEncoding.DecodeString(wrapped); err != nil {
		return nil, BadRequest("The client encryption key's wrappedDataEncryptionKey is not valid base64: %v.", err)
	}
	meta, ok := props["keyWrapMetadata"].(map[string]any)
	if !ok {
		return nil, BadRequest("The input content is invalid because the required property, keyWrapMetadata, is missing: it names the key encryption key that wrapped the key.")
	}
	for _, field := range []string{"type", "name", "value"} {
		if s, ok := meta[field].(string); !ok || s == "" {
			return nil, BadRequest("The client encryption key's keyWrapMetadata must have a non-empty string %s.", field)
		}
	}
	return props, nil
}

// CreateClientEncryptionKey creates a client encryption key in a database.
func (e *Engine) CreateClientEncryptionKey(ctx context.Context, db string, body []byte) (*Resource, error) {
	props, err := decodeEncryptionKey(body)
	if err != nil {
		return nil, err
	}
	return inDatabase(ctx, &e.catalog, db, true, func(d *Database) (*Resource, error) {
		res, _, err := e.createChild(ctx, encryptionKeysOf(d), props, false)
		return res, err
	})
}

// ReadClientEncryptionKey returns a client encryption key by id or RID.
func (e *Engine) ReadClientEncryptionKey(ctx context.Context, db, id string) (*Resource, error) {
	return inDatabase(ctx, &e.catalog, db, false, func(d *Database) (*Resource, error) {
		props, raw, err := encryptionKeysOf(d).read(ctx, e.store, id)
		if err != nil {
			return nil, err
		}
		return childResource(props, raw), nil
	})
}

// ListClientEncryptionKeys returns a database's client encryption keys,
// ordered by id.
func (e *Engine) ListClientEncryptionKeys(ctx context.Context, db string) ([]*Resource, error) {
	return inDatabase(ctx, &e.catalog, db, false, func(d *Database) ([]*Resource, error) {
		list, _, err := encryptionKeysOf(d).list(ctx, e.store)
		return list, err
	})
}

// ReplaceClientEncryptionKey replaces a client encryption key (a rewrap
// with another key encryption key); its id cannot change.
func (e *Engine) ReplaceClientEncryptionKey(ctx context.Context, db, id string, body []byte, ifMatch string) (*Resource, error) {
	props, err := decodeEncryptionKey(body)
	if err != nil {
		return nil, err
	}
	return inDatabase(ctx, &e.catalog, db, true, func(d *Database) (*Resource, error) {
		return e.replaceChild(ctx, encryptionKeysOf(d), id, props, ifMatch)
	})
}
