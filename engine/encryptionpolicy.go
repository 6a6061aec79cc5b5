package engine

import (
	"encoding/json"
	"strings"
)

// A container's clientEncryptionPolicy: the algorithm and types of an
// encrypted path, and the checks the service makes on a create or a
// replace (normalizeEncryptionPolicy). The client encryption keys, a
// database's resources, are in encryptionkeys.go.

// EncryptionAlgorithm is the one data encryption algorithm of Always
// Encrypted, of client encryption keys and of encrypted paths alike.
const EncryptionAlgorithm = "AEAD_AES_256_CBC_HMAC_SHA256"

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
