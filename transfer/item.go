package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// systemProperties are the properties the service adds to every item; an
// export leaves them out so that an import elsewhere starts them afresh.
var systemProperties = map[string]bool{"_rid": true, "_self": true, "_etag": true, "_attachments": true, "_ts": true}

// stripSystemProperties returns the item's JSON object without the system
// properties, every other member kept byte for byte in its order.
func stripSystemProperties(item []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(item))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("an item is not a JSON object")
	}
	out := make([]byte, 0, len(item))
	out = append(out, '{')
	first := true
	for dec.More() {
		keyStart := skipSpace(item, int(dec.InputOffset()))
		if keyStart < len(item) && item[keyStart] == ',' {
			keyStart = skipSpace(item, keyStart+1)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if systemProperties[key] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, item[keyStart:keyEnd]...)
		out = append(out, ':')
		out = append(out, raw...)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// partitionKeyOf returns the partition key value of an item under the
// container's partition key definition, and a string that is equal for two
// items exactly when their partition key values are.
func partitionKeyOf(def azcosmos.PartitionKeyDefinition, item []byte) (azcosmos.PartitionKey, string, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return azcosmos.PartitionKey{}, "", fmt.Errorf("not a JSON object: %w", err)
	}
	pk := azcosmos.NewPartitionKey()
	var key []byte
	for _, path := range def.Paths {
		var v any = doc
		for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
			m, ok := v.(map[string]any)
			if !ok {
				return pk, "", fmt.Errorf("no value at the partition key path %s", path)
			}
			if v, ok = m[seg]; !ok {
				return pk, "", fmt.Errorf("no value at the partition key path %s", path)
			}
		}
		kb, _ := json.Marshal(v)
		key = append(append(key, kb...), 0)
		switch x := v.(type) {
		case string:
			pk = pk.AppendString(x)
		case bool:
			pk = pk.AppendBool(x)
		case nil:
			pk = pk.AppendNull()
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return pk, "", fmt.Errorf("partition key %s: %w", path, err)
			}
			pk = pk.AppendNumber(f)
		default:
			return pk, "", fmt.Errorf("the partition key path %s holds an object or array", path)
		}
	}
	return pk, string(key), nil
}

// idOf returns the item's id.
func idOf(item []byte) (string, error) {
	var v struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(item, &v); err != nil {
		return "", err
	}
	if v.ID == nil {
		return "", errors.New("the item has no string id")
	}
	return *v.ID, nil
}
