package engine

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/pkey"
)

// Limits on partition key values.
const (
	// MaxPartitionKeyValueBytes is the largest partition key component, in bytes.
	MaxPartitionKeyValueBytes = pkey.MaxValueBytes
	// MaxPartitionKeyPaths is the most levels a hierarchical key may have.
	MaxPartitionKeyPaths = 3
)

// PartitionKeyDefinition is a container's partitionKey property.
type PartitionKeyDefinition struct {
	Paths     []string `json:"paths"`
	Kind      string   `json:"kind"`
	Version   int      `json:"version,omitempty"`
	SystemKey *bool    `json:"systemKey,omitempty"`
}

// normalize fills the defaults the service fills and validates the definition.
func (d *PartitionKeyDefinition) normalize() *Error {
	if len(d.Paths) == 0 {
		return BadRequest("The partition key definition must have at least one path.")
	}
	if len(d.Paths) > MaxPartitionKeyPaths {
		return BadRequest("The partition key definition can have at most %d paths.", MaxPartitionKeyPaths)
	}
	for _, p := range d.Paths {
		if at := badPartitionKeyPath(p); at >= 0 {
			return BadRequest("The partition key component definition path '%s' could not be accepted, failed near position %d. Partition key paths must contain only valid characters and not contain a trailing slash or wildcard character.", p, at)
		}
	}
	switch {
	case d.Kind == "":
		d.Kind = "Hash"
		if len(d.Paths) > 1 {
			d.Kind = "MultiHash"
		}
	case d.Kind == "Hash" && len(d.Paths) > 1:
		return BadRequest("A partition key of kind Hash must have exactly one path; use MultiHash for hierarchical keys.")
	case d.Kind != "Hash" && d.Kind != "MultiHash" && d.Kind != "Range":
		return BadRequest("The partition key kind %q is not supported.", d.Kind)
	}
	// A definition without a version is hash partitioning V1, as in the
	// service (its own EPK code reads a missing version as V1, and every SDK
	// reads it back so): the version stays absent. Hierarchical keys exist
	// only in V2.
	if d.Version == 0 && d.Kind == "MultiHash" {
		d.Version = 2
	}
	if d.Kind == "MultiHash" && d.Version != 2 {
		return BadRequest("Hierarchical partition keys (MultiHash) require version 2.")
	}
	return nil
}

// badPartitionKeyPath returns where a partition key path goes wrong, or -1.
// As in the service, a path is '/' and a property name, repeated: a name of
// letters, digits and '_', or any text in double quotes (/"user-id"); no
// empty name, no trailing slash, no wildcard.
func badPartitionKeyPath(p string) int {
	if !strings.HasPrefix(p, "/") {
		return 0
	}
	for i := 0; i < len(p); {
		i++ // past the '/'
		if i == len(p) {
			return i
		}
		if p[i] == '"' {
			j := i + 1
			for j < len(p) && p[j] != '"' {
				if p[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(p) || j == i+1 {
				return min(j, len(p))
			}
			i = j + 1
		} else {
			start := i
			for i < len(p) && p[i] != '/' {
				r, size := utf8.DecodeRuneInString(p[i:])
				if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
					return i
				}
				i += size
			}
			if i == start {
				return i
			}
		}
		if i < len(p) && p[i] != '/' {
			return i
		}
	}
	return -1
}

// PartitionKeyValue is one component of a partition key (engine/internal/pkey).
type PartitionKeyValue = pkey.Value

// PartitionKey is a logical partition key: one component per path of the
// container's definition. An empty PartitionKey addresses a legacy
// non-partitioned container.
type PartitionKey = pkey.Key

// StringKey returns a single-component partition key holding s.
func StringKey(s string) PartitionKey { return pkey.StringKey(s) }

// ParsePartitionKeyHeader parses the JSON array the SDKs send in
// x-ms-documentdb-partitionkey: strings, numbers, booleans, null, and {} for
// undefined.
func ParsePartitionKeyHeader(h string) (PartitionKey, error) {
	pk, err := pkey.ParseHeader(h)
	if err != nil {
		return nil, badPartitionKey(err)
	}
	return pk, nil
}

// ParsePartitionKeyHeaderIn is ParsePartitionKeyHeader, a key of one plain
// string held in *one (see pkey.ParseHeaderIn): a request keeps *one with
// it, and parses its one header into it.
func ParsePartitionKeyHeaderIn(one *[1]PartitionKeyValue, h string) (PartitionKey, error) {
	pk, err := pkey.ParseHeaderIn(one, h)
	if err != nil {
		return nil, badPartitionKey(err)
	}
	return pk, nil
}

// badPartitionKey is a partition key the model refused, as the service
// reports it.
func badPartitionKey(err error) *Error { return BadRequest("%s", err.Error()) }

func parsePartitionKeyComponent(r json.RawMessage) (PartitionKeyValue, *Error) {
	v, err := pkey.ParseValue(r)
	if err != nil {
		return PartitionKeyValue{}, badPartitionKey(err)
	}
	return v, nil
}

// extractPartitionKey reads the partition key of a decoded document.
// A missing property gives the undefined component.
func extractPartitionKey(def *PartitionKeyDefinition, doc map[string]any) (PartitionKey, *Error) {
	pk, err := pkey.Extract(def.Paths, doc)
	if err != nil {
		return nil, badPartitionKey(err)
	}
	return pk, nil
}

// effectivePartitionKey is the binary EPK that orders items in storage. The
// definition's kind does not change it: a Hash key has one component, a
// MultiHash key one hash per component, concatenated.
func effectivePartitionKey(_ *PartitionKeyDefinition, pk PartitionKey) []byte { return pk.EPK() }

// EPKHex renders a binary effective partition key as the upper-case hex the
// SDKs compare feed range boundaries with.
func EPKHex(b []byte) string { return pkey.Hex(b) }

// validID checks an item or resource id.
func validID(id string) *Error {
	switch {
	case id == "":
		return BadRequest("The input content is invalid because the required property, id, is missing.")
	case len(id) > 1023:
		// The service's words; its documented limit is 1,023 bytes.
		shown := id
		if len(shown) > 64 {
			shown = strings.ToValidUTF8(shown[:60], "") + "..."
		}
		return BadRequest("The input name '%s' is invalid. Ensure to provide a unique non-empty string less than '1024' characters. (The id is %d bytes long; the limit is 1023 bytes.)", shown, len(id))
	case !utf8.ValidString(id):
		return BadRequest("The id is not valid UTF-8.")
	case strings.ContainsAny(id, "/\\?#"):
		return BadRequest("The id %q contains an invalid character: '/', '\\\\', '?' and '#' are not allowed.", id)
	case strings.TrimSpace(id) != id && strings.TrimSpace(id) == "":
		return BadRequest("The id must not be blank.")
	}
	return nil
}
