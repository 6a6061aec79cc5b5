package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

func methodNotAllowed(r *http.Request) error {
	return &engine.Error{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed",
		Message: "The method " + r.Method + " is not allowed on " + r.URL.Path + "."}
}

var jsonContentType = []string{"application/json"}

// bufferedBodyBytes is the largest body net/http holds until the handler
// returns (its bufferBeforeChunkingSize): it then writes that body's
// Content-Length itself, the same header, without the response's header
// map holding it. A point read's answer thereby keeps its header map at 8
// entries, which a Go map holds in one group: at 9 net/http's copy of it
// (Header.Clone, at WriteHeader) and the map itself grow into tables, 5
// allocations more per request. A larger body would be sent chunked: it
// gets its Content-Length here (TestResponsesCarryContentLengthAtEverySize).
const bufferedBodyBytes = 2048

// writeJSON writes a successful JSON response.
func (r *request) writeJSON(status int, body []byte, etag string, charge float64) {
	r.writeJSONCharged(status, body, etag, charge, formatCharge(charge))
}

// writeJSONCharged is writeJSON with the charge's text, formatCharge(charge).
func (r *request) writeJSONCharged(status int, body []byte, etag string, charge float64, chargeText string) {
	if etag != "" {
		r.setHeader("Etag", hdrETag, etag)
	}
	r.setHeader("X-Ms-Request-Charge", hdrCharge, chargeText)
	r.charge = charge
	if body == nil {
		r.w.WriteHeader(status)
		return
	}
	r.w.Header()["Content-Type"] = jsonContentType
	if len(body) > bufferedBodyBytes || r.Method == http.MethodHead {
		r.setHeader("Content-Length", hdrContentLength, strconv.Itoa(len(body)))
	}
	r.w.WriteHeader(status)
	r.w.Write(body)
}

// writeFeed writes a feed envelope: {"_rid":…,"<key>":[…],"_count":n}.
func (r *request) writeFeed(rid, key string, docs [][]byte, continuation string, charge float64) {
	n := 64 + len(rid) + len(key)
	for _, d := range docs {
		n += len(d) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"_rid":"`...)
	b = append(b, rid...)
	b = append(b, `","`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	b = append(b, `],"_count":`...)
	b = strconv.AppendInt(b, int64(len(docs)), 10)
	b = append(b, '}')
	h := r.w.Header()
	h.Set("X-Ms-Item-Count", strconv.Itoa(len(docs)))
	if continuation != "" {
		h.Set("X-Ms-Continuation", continuation)
	}
	r.writeJSON(http.StatusOK, b, "", charge)
}

// maxItemCount parses x-ms-max-item-count (0 when absent or -1).
func (r *request) maxItemCount() (int, error) {
	v := header(r.Header, "X-Ms-Max-Item-Count")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < -1 || n == 0 {
		return 0, badRequest("The x-ms-max-item-count header %q is invalid: it must be -1 or a positive number.", v)
	}
	if n == -1 {
		return 0, nil
	}
	return n, nil
}

// partitionKey parses x-ms-documentdb-partitionkey; ok is false when absent.
// A key of one plain string (the common one) is held in r.pk, allocated
// with the request: calling it again parses the same header into it.
func (r *request) partitionKey() (engine.PartitionKey, bool, error) {
	v := header(r.Header, "X-Ms-Documentdb-Partitionkey")
	if v == "" {
		return nil, false, nil
	}
	pk, err := engine.ParsePartitionKeyHeaderIn(&r.pk, v)
	if err != nil {
		return nil, false, err
	}
	return pk, true, nil
}

// ifMatch returns the If-Match header as sent: ETags keep their quotes.
func (r *request) ifMatch() string { return strings.TrimSpace(header(r.Header, "If-Match")) }

func (r *request) ifNoneMatch() string { return strings.TrimSpace(header(r.Header, "If-None-Match")) }

// preferMinimal reports whether the client asked for no body on writes.
func (r *request) preferMinimal() bool {
	return strings.Contains(strings.ToLower(header(r.Header, "Prefer")), "return=minimal")
}

// throughput parses the offer headers of database and container creation.
func (r *request) throughput() (*engine.Throughput, error) {
	var t *engine.Throughput
	if v := header(r.Header, "X-Ms-Offer-Throughput"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest("The offer throughput %q is invalid: it must be a whole number of RU/s.", v)
		}
		t = &engine.Throughput{Manual: n}
	} else if v := header(r.Header, "X-Ms-Cosmos-Offer-Autopilot-Settings"); v != "" {
		var a struct {
			MaxThroughput int `json:"maxThroughput"`
		}
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			return nil, badRequest("The autoscale settings %q are invalid: they must be a JSON object with a whole maxThroughput.", v)
		}
		t = &engine.Throughput{AutoscaleMax: a.MaxThroughput}
	}
	if t == nil {
		return nil, nil
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}
