package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

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

// EncryptionAlgorithm is the one data encryption algorithm of Always
// Encrypted, of client encryption keys and of encrypted paths alike.
const EncryptionAlgorithm = "AEAD_AES_256_CBC_HMAC_SHA256"

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
	return inDatabase(ctx, e, db, true, func(d *Database) (*Resource, error) {
		res, _, err := e.createChild(ctx, encryptionKeysOf(d), props, false)
		return res, err
	})
}

// ReadClientEncryptionKey returns a client encryption key by id or RID.
func (e *Engine) ReadClientEncryptionKey(ctx context.Context, db, id string) (*Resource, error) {
	return inDatabase(ctx, e, db, false, func(d *Database) (*Resource, error) {
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
	return inDatabase(ctx, e, db, false, func(d *Database) ([]*Resource, error) {
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
	return inDatabase(ctx, e, db, true, func(d *Database) (*Resource, error) {
		return e.replaceChild(ctx, encryptionKeysOf(d), id, props, ifMatch)
	})
}

// Encryption types of an encrypted path.
const (
	EncryptionDeterministic = "Deterministic"
	EncryptionRandomized    = "Randomized"
)

// normalizeEncryptionPolicy checks a container's clientEncryptionPolicy as
// the service does and fills its policyFormatVersion (1) when absent; pk is
// the container's partition key definition, prev the current container on
// a replace, whose policy a replace keeps when it gives none and cannot
// change.
func normalizeEncryptionPolicy(out map[string]any, pk PartitionKeyDefinition, prev *Container) *Error {
	v, ok := out["clientEncryptionPolicy"]
	if !ok || v == nil {
		delete(out, "clientEncryptionPolicy")
		if prev != nil && prev.record.Props["clientEncryptionPolicy"] != nil {
			out["clientEncryptionPolicy"] = prev.record.Props["clientEncryptionPolicy"]
		}
		return nil
	}
	policy, ok := v.(map[string]any)
	if !ok {
		return BadRequest("The clientEncryptionPolicy must be a JSON object with includedPaths and policyFormatVersion.")
	}
	version := 1
	if fv, ok := policy["policyFormatVersion"]; ok && fv != nil {
		n, whole := wholeNumber(fv)
		if !whole || n < 1 || n > 2 {
			return BadRequest("The clientEncryptionPolicy's policyFormatVersion %v is invalid: supported versions of client encryption policy are 1 and 2.", fv)
		}
		version = n
	}
	policy["policyFormatVersion"] = float64(version)
	paths, ok := policy["includedPaths"].([]any)
	if !ok {
		return BadRequest("The clientEncryptionPolicy must have includedPaths: an array of the paths to encrypt.")
	}
	seen := map[string]bool{}
	for _, p := range paths {
		inc, ok := p.(map[string]any)
		if !ok {
			return BadRequest("Each of the clientEncryptionPolicy's includedPaths must be a JSON object.")
		}
		path, _ := inc["path"].(string)
		switch {
		case path == "" || path == "/":
			return BadRequest("Path needs to be defined in ClientEncryptionIncludedPath.")
		case path[0] != '/':
			return BadRequest("Path in ClientEncryptionIncludedPath must start with '/': %q does not.", path)
		case len(strings.FieldsFunc(path, func(r rune) bool { return r == '/' })) > 1:
			return BadRequest("Only top-level paths are currently supported for encryption: %q is nested.", path)
		case seen[path]:
			return BadRequest("Duplicate path found: %s in client encryption policy.", path)
		}
		seen[path] = true
		if id, ok := inc["clientEncryptionKeyId"].(string); !ok || id == "" {
			return BadRequest("ClientEncryptionKeyId needs to be defined as string type in ClientEncryptionIncludedPath (path %s).", path)
		}
		if alg, _ := inc["encryptionAlgorithm"].(string); alg != EncryptionAlgorithm {
			return BadRequest("The encryptionAlgorithm %q of path %s is invalid: the supported algorithm is %s.", inc["encryptionAlgorithm"], path, EncryptionAlgorithm)
		}
		typ, _ := inc["encryptionType"].(string)
		if typ != EncryptionDeterministic && typ != EncryptionRandomized {
			return BadRequest("The encryptionType %q of path %s is invalid: it must be Deterministic or Randomized.", inc["encryptionType"], path)
		}
		partOfKey := false
		for _, kp := range pk.Paths {
			partOfKey = partOfKey || kp == path
		}
		switch {
		case path == "/id" && typ != EncryptionDeterministic:
			return BadRequest("The '/id' property must be encrypted using Deterministic encryption.")
		case partOfKey && typ != EncryptionDeterministic:
			return BadRequest("Path: %s which is part of the partition key has to be encrypted with Deterministic type Encryption.", path)
		case (partOfKey || path == "/id") && version < 2:
			return BadRequest("Encryption of partition key or id is only supported with policy format version 2.")
		}
	}
	if prev != nil {
		if old := prev.record.Props["clientEncryptionPolicy"]; !sameJSON(old, policy) {
			return BadRequest("The client encryption policy of a container cannot be changed after it is created: create a new container with the policy and copy the items.")
		}
	}
	return nil
}

// sameJSON reports whether two JSON values encode alike.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
