package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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

// SeedContainer is a container of a seed file: any container property the
// service takes (id, partitionKey, defaultTtl, indexingPolicy,
// uniqueKeyPolicy, ...) and the items to put in it.
type SeedContainer struct {
	Properties azcosmos.ContainerProperties
	// Throughput, when set, is the container's manual throughput (RU/s).
	Throughput *int32
	Items      json.RawMessage
}

// UnmarshalJSON reads a container's properties and its items from one object.
func (c *SeedContainer) UnmarshalJSON(b []byte) error {
	var extra struct {
		Items      json.RawMessage `json:"items"`
		Throughput *int32          `json:"throughput"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &c.Properties); err != nil {
		return err
	}
	c.Items, c.Throughput = extra.Items, extra.Throughput
	if len(c.Items) > 0 && c.Items[0] != '[' && string(c.Items) != "null" {
		return fmt.Errorf("container %s: items must be an array", c.Properties.ID)
	}
	return nil
}

// Seed creates what the seed file describes that does not exist yet: a
// database, container or item (by id and partition key) that exists is left
// as it is, so seeding twice changes nothing.
func Seed(ctx context.Context, client *azcosmos.Client, r io.Reader) (*Summary, error) {
	var f SeedFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	total := &Summary{}
	for _, d := range f.Databases {
		if d.ID == "" {
			return total, errors.New("seed file: a database has no id")
		}
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
			if c.Properties.ID == "" {
				return total, fmt.Errorf("seed file: a container of database %s has no id", d.ID)
			}
			var cOpts *azcosmos.CreateContainerOptions
			if c.Throughput != nil {
				tp := azcosmos.NewManualThroughputProperties(*c.Throughput)
				cOpts = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
			}
			if _, err := db.CreateContainer(ctx, c.Properties, cOpts); err != nil && !isConflict(err) {
				return total, fmt.Errorf("creating container %s/%s: %w", d.ID, c.Properties.ID, err)
			}
			if len(c.Items) == 0 || string(c.Items) == "null" {
				continue
			}
			cc, err := db.NewContainer(c.Properties.ID)
			if err != nil {
				return total, err
			}
			sum, err := Import(ctx, cc, bytes.NewReader(c.Items), ImportOptions{Mode: CreateIfAbsent})
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
