package changefeed

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Version is one change of the all-versions-and-deletes feed: a create, a
// replace or a delete, with the item's version and the change's metadata.
type Version struct {
	// Operation is "create", "replace" or "delete".
	Operation string
	// Current is the item as the change left it; nil on a delete.
	Current json.RawMessage
	// Previous is the item before the change when the feed gives it (on a
	// delete, the deleted version).
	Previous json.RawMessage
	// LSN is the change's log sequence number; PreviousLSN is the one of
	// the version it replaced or deleted (0 when the feed gives none).
	LSN, PreviousLSN int64
	// Time is when the change was made (the service's conflict resolution
	// timestamp, one-second resolution).
	Time time.Time
	// ID and PartitionKey name the item of a delete (whose Current is nil).
	ID           string
	PartitionKey json.RawMessage
	// TimeToLiveExpired is true for a delete made by the item's time to
	// live rather than by a client.
	TimeToLiveExpired bool
}

// Versions decodes the batch's changes as all-versions-and-deletes records
// ({"current", "previous", "metadata"}), the shape a processor in
// AllVersionsAndDeletes mode delivers.
func (b Batch) Versions() ([]Version, error) {
	out := make([]Version, 0, len(b.Changes))
	for i, raw := range b.Changes {
		v, err := ParseVersion(raw)
		if err != nil {
			return nil, fmt.Errorf("changefeed: change %d of lease %s: %w", i, b.LeaseToken, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseVersion decodes one all-versions-and-deletes record.
func ParseVersion(raw []byte) (Version, error) {
	var rec struct {
		Current  json.RawMessage `json:"current"`
		Previous json.RawMessage `json:"previous"`
		Metadata *struct {
			OperationType     string          `json:"operationType"`
			LSN               int64           `json:"lsn"`
			CRTS              int64           `json:"crts"`
			PreviousImageLSN  int64           `json:"previousImageLSN"`
			ID                string          `json:"id"`
			PartitionKey      json.RawMessage `json:"partitionKey"`
			TimeToLiveExpired bool            `json:"timeToLiveExpired"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Version{}, err
	}
	if rec.Metadata == nil {
		return Version{}, fmt.Errorf("not an all-versions-and-deletes record (no metadata): a processor in %s mode delivers those", AllVersionsAndDeletes)
	}
	m := rec.Metadata
	v := Version{Operation: strings.ToLower(m.OperationType), Current: rec.Current, Previous: rec.Previous,
		LSN: m.LSN, PreviousLSN: m.PreviousImageLSN, ID: m.ID, PartitionKey: m.PartitionKey, TimeToLiveExpired: m.TimeToLiveExpired}
	if m.CRTS > 0 {
		v.Time = time.Unix(m.CRTS, 0)
	}
	if v.Operation == "delete" || isEmpty(v.Current) {
		v.Current = nil
	}
	if isEmpty(v.Previous) {
		v.Previous = nil
	}
	if v.ID == "" {
		var doc struct {
			ID string `json:"id"`
		}
		if src := v.Current; src != nil {
			_ = json.Unmarshal(src, &doc)
		} else if v.Previous != nil {
			_ = json.Unmarshal(v.Previous, &doc)
		}
		v.ID = doc.ID
	}
	return v, nil
}

// isEmpty reports whether raw is absent, null or {}.
func isEmpty(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null" || strings.ReplaceAll(s, " ", "") == "{}"
}
