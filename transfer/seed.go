package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// SeedFile is the layout of a seed file: databases, their containers (with
// the properties a container is created with) and the containers' items.
//
//	{"databases": [{"id": "shop", "containers": [
//	    {"id": "orders", "partitionKey": {"paths": ["/customerId"], "kind": "Hash"},
//	     "defaultTtl": -1,
//	     "items": [{"id": "1", "customerId": "alice", "total": 12.5}]}]}]}
type SeedFile struct {
	Databases []SeedDatabase `json:"databases"`
}

// SeedDatabase is a database of a seed file.
type SeedDatabase struct {
	ID string `json:"id"`
	// Throughput, when set, is the database's shared manual throughput (RU/s).
	Throughput *int32          `json:"throughput,omitempty"`
	Containers []SeedContainer `json:"containers"`
}

// SeedContainer is a container of a seed file: the container properties the
// SDK sends (id, partitionKey, defaultTtl, analyticalStorageTtl,
// indexingPolicy, uniqueKeyPolicy, conflictResolutionPolicy,
// vectorEmbeddingPolicy, fullTextPolicy) and the items to put in it.
type SeedContainer struct {
	Properties azcosmos.ContainerProperties
	// Throughput, when set, is the container's manual throughput (RU/s).
	Throughput *int32
	Items      []json.RawMessage
}

// UnmarshalJSON reads a container's properties and its items from one object.
func (c *SeedContainer) UnmarshalJSON(b []byte) error {
	var extra struct {
		Items      []json.RawMessage `json:"items"`
		Throughput *int32            `json:"throughput"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &c.Properties); err != nil {
		return err
	}
	c.Items, c.Throughput = extra.Items, extra.Throughput
	return nil
}

// ParseSeed reads a seed file and checks all of it before anything is
// created: every key is one the file's layout has (a misspelt key is named,
// with the keys allowed there), every value has its type, every database,
// container and item has an id, no two share one (items: in one logical
// partition), and each fault is placed by line and column.
func ParseSeed(data []byte) (*SeedFile, error) {
	p := &seedParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), line: 1, col: 1, items: map[string][]seedItem{}}
	p.dec.UseNumber()
	if err := p.walk(seedSchema, seedRoot, ""); err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	if _, err := p.dec.Token(); err != io.EOF {
		off := p.valueStart()
		l, c := p.at(off)
		return nil, fmt.Errorf("seed file: line %d, column %d: unexpected content after the seed's object", l, c)
	}
	var f SeedFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	if err := p.checkIDs(&f); err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	return &f, nil
}

// Seed creates what the seed file describes that does not exist yet: a
// database, container or item (by id and partition key) that exists is left
// as it is, so seeding twice changes nothing. The file is checked whole
// (ParseSeed) before anything is created. Items without a partition key
// property need the client to have PartitionKeyPolicy.
func Seed(ctx context.Context, client *azcosmos.Client, r io.Reader) (*Summary, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	f, err := ParseSeed(data)
	if err != nil {
		return nil, err
	}
	total := &Summary{}
	for _, d := range f.Databases {
		var dbOpts *azcosmos.CreateDatabaseOptions
		if d.Throughput != nil {
			tp := azcosmos.NewManualThroughputProperties(*d.Throughput)
			dbOpts = &azcosmos.CreateDatabaseOptions{ThroughputProperties: &tp}
		}
		if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: d.ID}, dbOpts); err != nil && !isConflict(err) {
			return total, fmt.Errorf("creating database %s: %w", d.ID, err)
		}
		db, err := client.NewDatabase(d.ID)
		if err != nil {
			return total, err
		}
		for _, c := range d.Containers {
			var cOpts *azcosmos.CreateContainerOptions
			if c.Throughput != nil {
				tp := azcosmos.NewManualThroughputProperties(*c.Throughput)
				cOpts = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
			}
			if _, err := db.CreateContainer(ctx, c.Properties, cOpts); err != nil && !isConflict(err) {
				return total, fmt.Errorf("creating container %s/%s: %w", d.ID, c.Properties.ID, err)
			}
			if len(c.Items) == 0 {
				continue
			}
			cc, err := db.NewContainer(c.Properties.ID)
			if err != nil {
				return total, err
			}
			var items bytes.Buffer
			for _, it := range c.Items {
				items.Write(it)
				items.WriteByte('\n')
			}
			sum, err := Import(ctx, cc, &items, ImportOptions{Mode: CreateIfAbsent})
			if sum != nil {
				total.Written += sum.Written
				total.Skipped += sum.Skipped
				total.Failed += sum.Failed
				total.Failures = append(total.Failures, sum.Failures...)
			}
			if err != nil {
				return total, fmt.Errorf("items of %s/%s: %w", d.ID, c.Properties.ID, err)
			}
		}
	}
	if total.Failed > 0 {
		return total, fmt.Errorf("seed file: %d items could not be created:\n%s", total.Failed, total)
	}
	return total, nil
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == 409
}

// seedRoot names the seed file's object in messages.
const seedRoot = "the seed file"

// schema is what a seed file holds at one place.
type schema struct {
	kind     schemaKind
	fields   map[string]*schema // kindObject: the keys it takes
	elem     *schema            // kindArray, kindMap
	nullable bool
	min, max float64 // kindInteger
	items    bool    // an array of items: free-form objects, kept for checks
}

type schemaKind int

const (
	kindAny schemaKind = iota
	kindObject
	kindMap
	kindArray
	kindString
	kindInteger
	kindNumber
	kindBool
)

var seedSchema = func() *schema {
	container := &schema{kind: kindObject, fields: map[string]*schema{
		"id":                       {kind: kindString},
		"partitionKey":             schemaOf(reflect.TypeFor[azcosmos.PartitionKeyDefinition]()),
		"defaultTtl":               schemaOf(reflect.TypeFor[*int32]()),
		"analyticalStorageTtl":     schemaOf(reflect.TypeFor[*int32]()),
		"indexingPolicy":           schemaOf(reflect.TypeFor[*azcosmos.IndexingPolicy]()),
		"uniqueKeyPolicy":          schemaOf(reflect.TypeFor[*azcosmos.UniqueKeyPolicy]()),
		"conflictResolutionPolicy": schemaOf(reflect.TypeFor[*azcosmos.ConflictResolutionPolicy]()),
		"vectorEmbeddingPolicy":    schemaOf(reflect.TypeFor[*azcosmos.VectorEmbeddingPolicy]()),
		"fullTextPolicy":           schemaOf(reflect.TypeFor[*azcosmos.FullTextPolicy]()),
		"throughput":               schemaOf(reflect.TypeFor[*int32]()),
		"items":                    {kind: kindArray, nullable: true, items: true, elem: &schema{kind: kindAny}},
	}}
	database := &schema{kind: kindObject, fields: map[string]*schema{
		"id":         {kind: kindString},
		"throughput": schemaOf(reflect.TypeFor[*int32]()),
		"containers": {kind: kindArray, nullable: true, elem: container},
	}}
	return &schema{kind: kindObject, fields: map[string]*schema{
		"databases": {kind: kindArray, nullable: true, elem: database},
	}}
}()

// schemaOf derives a schema from the SDK type the value decodes into: its
// JSON keys and their types, so that it follows the SDK.
func schemaOf(t reflect.Type) *schema {
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	s := &schema{nullable: nullable}
	switch t.Kind() {
	case reflect.Struct:
		s.kind, s.fields = kindObject, map[string]*schema{}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s.fields[name] = schemaOf(f.Type)
		}
	case reflect.Slice:
		s.kind, s.elem, s.nullable = kindArray, schemaOf(t.Elem()), true
	case reflect.Map:
		s.kind, s.elem, s.nullable = kindMap, schemaOf(t.Elem()), true
	case reflect.String:
		s.kind = kindString
	case reflect.Bool:
		s.kind = kindBool
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		bits := t.Bits()
		s.kind, s.min, s.max = kindInteger, -math.Pow(2, float64(bits-1)), math.Pow(2, float64(bits-1))-1
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		s.kind, s.min, s.max = kindInteger, 0, math.Pow(2, float64(t.Bits()))-1
	case reflect.Float32, reflect.Float64:
		s.kind = kindNumber
	default:
		s.kind = kindAny
	}
	return s
}

// seedParser walks a seed file's tokens along the schema.
type seedParser struct {
	data []byte
	dec  *json.Decoder
	// the position of offset off, kept to count lines forward only
	off       int64
	line, col int64
	// items are the items of each container by its path
	// ("databases[0].containers[1]"), with where each starts.
	items map[string][]seedItem
}

type seedItem struct {
	raw       json.RawMessage
	line, col int64
}

// valueStart is the offset of the next token.
func (p *seedParser) valueStart() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return off
}

// at is the line and column of offset off.
func (p *seedParser) at(off int64) (int64, int64) {
	if off < p.off {
		p.off, p.line, p.col = 0, 1, 1
	}
	p.line, p.col = advance(p.line, p.col, p.data[p.off:off])
	p.off = off
	return p.line, p.col
}

func (p *seedParser) errAt(off int64, format string, args ...any) error {
	l, c := p.at(off)
	return fmt.Errorf("line %d, column %d: %s", l, c, fmt.Sprintf(format, args...))
}

// token reads the next token, placing a syntax error.
func (p *seedParser) token() (json.Token, int64, error) {
	off := p.valueStart()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, off, p.syntax(err)
	}
	return tok, off, nil
}

func (p *seedParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// A Decoder's offset is that of the byte at fault.
		return p.errAt(min(se.Offset, int64(len(p.data))), "%s", se.Error())
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errAt(int64(len(p.data)), "unexpected end of input")
	}
	return err
}

func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a value"
}

func (s *schema) want() string {
	switch s.kind {
	case kindObject, kindMap:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindInteger:
		return "a whole number"
	case kindNumber:
		return "a number"
	case kindBool:
		return "true or false"
	}
	return "a value"
}

// walk checks the next value against s; where names it in messages, path
// is its place in the layout.
func (p *seedParser) walk(s *schema, where, path string) error {
	if s.kind == kindAny {
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return p.syntax(err)
		}
		return nil
	}
	tok, off, err := p.token()
	if err != nil {
		return err
	}
	if tok == nil && s.nullable {
		return nil
	}
	switch s.kind {
	case kindObject, kindMap:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return p.errAt(off, "%s must be %s, not %s", where, s.want(), tokenKind(tok))
		}
		seen := map[string]bool{}
		id := ""
		for p.dec.More() {
			ktok, koff, err := p.token()
			if err != nil {
				return err
			}
			key, _ := ktok.(string)
			if seen[key] {
				return p.errAt(koff, "%s has the key %q twice", where, key)
			}
			seen[key] = true
			field := s.elem
			if s.kind == kindObject {
				field = s.fields[key]
				if field == nil {
					return p.errAt(koff, "%s has an unknown key %q; the keys it takes are %s", where, key, keyList(s.fields))
				}
			}
			inner := where + "." + key
			switch {
			case where == seedRoot:
				inner = key
			case id != "":
				inner = fmt.Sprintf("%s (%q).%s", where, id, key)
			}
			if key == "id" && field.kind == kindString {
				// Peek at the id to name the object in later messages.
				if err := json.Unmarshal(rawValueAt(p.data, p.valueStart()), &id); err != nil {
					id = ""
				}
			}
			if field.items {
				if err := p.walkItems(inner, path); err != nil {
					return err
				}
				continue
			}
			if err := p.walk(field, inner, path+"."+key); err != nil {
				return err
			}
		}
		if _, _, err := p.token(); err != nil {
			return err
		}
		return nil
	case kindArray:
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return p.errAt(off, "%s must be %s, not %s", where, s.want(), tokenKind(tok))
		}
		for i := 0; p.dec.More(); i++ {
			if err := p.walk(s.elem, fmt.Sprintf("%s[%d]", where, i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, _, err := p.token()
		return err
	case kindString:
		if _, ok := tok.(string); !ok {
			return p.errAt(off, "%s must be %s, not %s", where, s.want(), tokenKind(tok))
		}
	case kindBool:
		if _, ok := tok.(bool); !ok {
			return p.errAt(off, "%s must be %s, not %s", where, s.want(), tokenKind(tok))
		}
	case kindNumber, kindInteger:
		n, ok := tok.(json.Number)
		if !ok {
			return p.errAt(off, "%s must be %s, not %s", where, s.want(), tokenKind(tok))
		}
		if s.kind == kindInteger {
			i, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil || float64(i) < s.min || float64(i) > s.max {
				return p.errAt(off, "%s must be a whole number from %.0f to %.0f, not %s", where, s.min, s.max, n)
			}
		}
	}
	return nil
}

// rawValueAt returns the JSON value starting at off, or nil.
func rawValueAt(data []byte, off int64) []byte {
	dec := json.NewDecoder(bytes.NewReader(data[off:]))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil
	}
	return raw
}

// walkItems reads a container's items array, keeping each item and where
// it starts.
func (p *seedParser) walkItems(where, path string) error {
	tok, off, err := p.token()
	if err != nil {
		return err
	}
	var items []seedItem
	defer func() { p.items[path] = items }()
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return p.errAt(off, "%s must be an array of items, not %s", where, tokenKind(tok))
	}
	for p.dec.More() {
		ioff := p.valueStart()
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return p.syntax(err)
		}
		l, c := p.at(ioff)
		items = append(items, seedItem{raw: raw, line: l, col: c})
	}
	_, _, err = p.token()
	return err
}

func keyList(fields map[string]*schema) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// checkIDs checks that every database, container and item has an id, that
// no two databases, no two containers of a database and no two items of a
// logical partition share one, and that every container has a partition
// key.
func (p *seedParser) checkIDs(f *SeedFile) error {
	dbs := map[string]bool{}
	for i, d := range f.Databases {
		if d.ID == "" {
			return fmt.Errorf("databases[%d] has no id", i)
		}
		if dbs[d.ID] {
			return fmt.Errorf("the database %q appears twice", d.ID)
		}
		dbs[d.ID] = true
		cs := map[string]bool{}
		for j, c := range d.Containers {
			items := p.items[fmt.Sprintf(".databases[%d].containers[%d]", i, j)]
			id := c.Properties.ID
			if id == "" {
				return fmt.Errorf("database %q: containers[%d] has no id", d.ID, j)
			}
			if cs[id] {
				return fmt.Errorf("database %q: the container %q appears twice", d.ID, id)
			}
			cs[id] = true
			if len(c.Properties.PartitionKeyDefinition.Paths) == 0 {
				return fmt.Errorf(`container %s/%s has no partitionKey (e.g. "partitionKey": {"paths": ["/pk"]})`, d.ID, id)
			}
			seen := map[string]int{}
			var dups []string
			for n, it := range items {
				if len(it.raw) == 0 || it.raw[0] != '{' {
					return fmt.Errorf("line %d, column %d: container %s/%s: items[%d] must be an object, not %s", it.line, it.col, d.ID, id, n, jsonKind(it.raw[0]))
				}
				key, err := keyOf(c.Properties.PartitionKeyDefinition, it.raw)
				if err != nil {
					return fmt.Errorf("line %d, column %d: container %s/%s: items[%d]: %v", it.line, it.col, d.ID, id, n, err)
				}
				dk := key.canon + "\x00" + key.id
				if first, ok := seen[dk]; ok {
					if len(dups) < 10 {
						dups = append(dups, fmt.Sprintf("id %q, partition key %s: items[%d] (line %d) and items[%d] (line %d)", key.id, key.canon, first, items[first].line, n, it.line))
					} else if len(dups) == 10 {
						dups = append(dups, "…")
					}
					continue
				}
				seen[dk] = n
			}
			if len(dups) > 0 {
				return fmt.Errorf("container %s/%s has items with the same id and partition key, which it can hold only one of:\n  %s", d.ID, id, strings.Join(dups, "\n  "))
			}
		}
	}
	return nil
}
