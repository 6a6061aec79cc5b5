package pkey

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Segments returns the property names of a partition key path ("/a/b":
// a, b), unescaping "~1" and "~0" as JSON pointers do.
func Segments(path string) ([]string, error) {
	if !strings.HasPrefix(path, "/") || path == "/" {
		return nil, fmt.Errorf("partition key path %q must start with / and name a property", path)
	}
	parts := strings.Split(path[1:], "/")
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("partition key path %q has an empty segment", path)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// Values returns the values of key for a partition key of n paths: key
// itself for one path, the elements of key (a []any, or a []string) for
// several. Each value is a string, a number, a bool or nil.
func Values(key any, n int) ([]any, error) {
	var vals []any
	switch k := key.(type) {
	case []any:
		vals = k
	case []string:
		for _, s := range k {
			vals = append(vals, s)
		}
	default:
		vals = []any{key}
	}
	if len(vals) != n {
		return nil, fmt.Errorf("partition key %v has %d value(s); the container's partition key has %d path(s)", key, len(vals), n)
	}
	out := make([]any, len(vals))
	for i, v := range vals {
		s, err := scalar(v)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// scalar normalizes a partition key value: numbers become float64 (as
// JSON decodes them), a json.Number too.
func scalar(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int8:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint:
		return float64(x), nil
	case uint8:
		return float64(x), nil
	case uint16:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case json.Number:
		f, err := x.Float64()
		return f, err
	}
	return nil, fmt.Errorf("partition key value %v (%T) is not a string, number, bool or null", v, v)
}

// PartitionKey is the SDK's partition key of values (from Values).
func PartitionKey(values []any) azcosmos.PartitionKey {
	pk := azcosmos.NewPartitionKey()
	for _, v := range values {
		switch x := v.(type) {
		case string:
			pk = pk.AppendString(x)
		case bool:
			pk = pk.AppendBool(x)
		case float64:
			pk = pk.AppendNumber(x)
		default:
			pk = pk.AppendNull()
		}
	}
	return pk
}

// Set sets values at the paths in doc, creating the objects a nested path
// goes through. It fails when a path goes through a property of doc that
// holds something other than an object.
func Set(doc map[string]any, paths []string, values []any) error {
	for i, p := range paths {
		segs, err := Segments(p)
		if err != nil {
			return err
		}
		m := doc
		for _, s := range segs[:len(segs)-1] {
			next, ok := m[s]
			if !ok {
				child := map[string]any{}
				m[s] = child
				m = child
				continue
			}
			child, ok := next.(map[string]any)
			if !ok {
				return fmt.Errorf("partition key path %s goes through %q, which is not an object", p, s)
			}
			m = child
		}
		m[segs[len(segs)-1]] = values[i]
	}
	return nil
}

// Paths reads a container's partition key paths from its properties.
func Paths(props azcosmos.ContainerProperties) ([]string, error) {
	paths := props.PartitionKeyDefinition.Paths
	if len(paths) == 0 {
		return nil, fmt.Errorf("container %q has no partition key path", props.ID)
	}
	for _, p := range paths {
		if _, err := Segments(p); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// Top is the top-level property a path starts with.
func Top(path string) string {
	segs, err := Segments(path)
	if err != nil {
		return ""
	}
	return segs[0]
}
