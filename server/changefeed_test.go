package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// feedClient speaks raw HTTP to the change feed of one container, the way
// the JavaScript and Python SDKs do, with the headers the Go SDK never sends.
type feedClient struct {
	t    *testing.T
	base string
}

type feedResponse struct {
	status int
	header http.Header
	docs   []json.RawMessage
}

func (f *feedClient) get(headers map[string]string) feedResponse {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.base+"dbs/db/colls/c/docs", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(server.EmulatorKey, "GET", "docs", "dbs/db/colls/c", date)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-version", "2020-07-15")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := feedResponse{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode == http.StatusOK {
		var env struct {
			Documents []json.RawMessage `json:"Documents"`
			Count     int               `json:"_count"`
		}
		if err := json.Unmarshal(body, &env); err != nil || env.Count != len(env.Documents) {
			f.t.Fatalf("change feed body %s: %v", body, err)
		}
		out.docs = env.Documents
	} else if resp.StatusCode != http.StatusNotModified && !json.Valid(body) {
		f.t.Fatalf("error %d without a JSON body: %s", resp.StatusCode, body)
	}
	return out
}

func (r feedResponse) ids(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, d := range r.docs {
		var v struct {
			ID      string `json:"id"`
			Current struct {
				ID string `json:"id"`
			} `json:"current"`
			Metadata struct {
				OperationType string `json:"operationType"`
				ID            string `json:"id"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(d, &v); err != nil {
			t.Fatal(err)
		}
		switch {
		case v.Metadata.OperationType == "delete":
			out = append(out, "delete:"+v.Metadata.ID)
		case v.Metadata.OperationType != "":
			out = append(out, v.Metadata.OperationType+":"+v.Current.ID)
		default:
			out = append(out, v.ID)
		}
	}
	return out
}

const incremental = "Incremental Feed"

func TestChangeFeedOverHTTP(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	// The Go SDK cannot set a changeFeedPolicy, which the all-versions-and-
	// deletes mode needs.
	if _, err := s.Engine.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"version":2},"changeFeedPolicy":{"retentionDuration":60}}`), nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("c")
	put := func(id, pk string) {
		t.Helper()
		body := `{"id":"` + id + `","pk":"` + pk + `"}`
		if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	f := &feedClient{t: t, base: s.Endpoint}

	now := f.get(map[string]string{"A-IM": incremental, "If-None-Match": "*"})
	if now.status != http.StatusNotModified || now.header.Get("etag") == "" {
		t.Fatalf("start from now: status %d etag %q, want 304 with an etag", now.status, now.header.Get("etag"))
	}
	avadNow := f.get(map[string]string{"A-IM": "Full-Fidelity Feed", "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15", "If-None-Match": "*"})
	put("a", "p1")
	put("b", "p2")
	put("a", "p1")
	if _, err := c.DeleteItem(ctx, azcosmos.NewPartitionKeyString("p2"), "b", nil); err != nil {
		t.Fatal(err)
	}
	put("c", "p3")

	epkP1 := engine.EPKHex(mustEPK(t, "p1"))
	tests := []struct {
		name    string
		headers map[string]string
		status  int
		want    string
	}{
		{"beginning", map[string]string{"A-IM": incremental}, 200, "[a c]"},
		{"Python's spelling", map[string]string{"A-IM": "Incremental feed"}, 200, "[a c]"},
		{"continuation from now", map[string]string{"A-IM": incremental, "If-None-Match": now.header.Get("etag")}, 200, "[a c]"},
		{"range 0", map[string]string{"A-IM": incremental, "x-ms-documentdb-partitionkeyrangeid": "0"}, 200, "[a c]"},
		{"EPK sub-range of p1", map[string]string{"A-IM": incremental, "x-ms-documentdb-partitionkeyrangeid": "0",
			"x-ms-start-epk": epkP1, "x-ms-end-epk": epkP1 + "00", "x-ms-read-key-type": "EffectivePartitionKeyRange"}, 200, "[a]"},
		{"partition key", map[string]string{"A-IM": incremental, "x-ms-documentdb-partitionkey": `["p3"]`}, 200, "[c]"},
		{"page size", map[string]string{"A-IM": incremental, "x-ms-max-item-count": "1"}, 200, "[a]"},
		{"since the future", map[string]string{"A-IM": incremental, "If-Modified-Since": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, 304, "[]"},
		{"since the past", map[string]string{"A-IM": incremental, "If-Modified-Since": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}, 200, "[a c]"},
		{"all versions and deletes", map[string]string{"A-IM": "Full-Fidelity Feed", "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15",
			"If-None-Match": avadNow.header.Get("etag")}, 200, "[create:a create:b replace:a delete:b create:c]"},
		{"unknown range", map[string]string{"A-IM": incremental, "x-ms-documentdb-partitionkeyrangeid": "7"}, 410, "[]"},
		{"unknown mode", map[string]string{"A-IM": "Everything"}, 400, "[]"},
		{"bad continuation", map[string]string{"A-IM": incremental, "If-None-Match": `"x"`}, 400, "[]"},
		{"bad time", map[string]string{"A-IM": incremental, "If-Modified-Since": "yesterday"}, 400, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &feedClient{t: t, base: s.Endpoint}
			res := f.get(tt.headers)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d", res.status, tt.status)
			}
			if got := "[" + strings.Join(res.ids(t), " ") + "]"; got != tt.want {
				t.Errorf("items %s, want %s", got, tt.want)
			}
			if tt.status == 410 && res.header.Get("x-ms-substatus") != "1002" {
				t.Errorf("410 with substatus %q, want 1002", res.header.Get("x-ms-substatus"))
			}
			if tt.status < 300 || tt.status == 304 {
				if res.header.Get("etag") == "" {
					t.Error("no etag")
				}
				// The etag is the continuation: following it, nothing is new.
				h := map[string]string{"If-None-Match": res.header.Get("etag")}
				for k, v := range tt.headers {
					if k != "If-None-Match" && k != "x-ms-max-item-count" {
						h[k] = v
					}
				}
				if tt.name == "page size" {
					h["x-ms-max-item-count"] = "1"
					next := f.get(h)
					if got := next.ids(t); len(got) != 1 || got[0] != "c" {
						t.Fatalf("second page %v, want [c]", got)
					}
					h["If-None-Match"] = next.header.Get("etag")
				}
				again := f.get(h)
				if again.status != http.StatusNotModified || again.header.Get("etag") == "" {
					t.Errorf("following the etag: status %d, etag %q; want 304 with an etag", again.status, again.header.Get("etag"))
				}
			}
		})
	}
}

func mustEPK(t *testing.T, pk string) []byte {
	t.Helper()
	def := engine.PartitionKeyDefinition{Paths: []string{"/pk"}, Kind: "Hash", Version: 2}
	return engine.EffectivePartitionKey(&def, engine.StringKey(pk))
}
