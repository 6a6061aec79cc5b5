package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// isBatch reports whether a POST on items is a transactional batch or a bulk
// request.
func (r *request) isBatch() bool { return headerBool(r.Header, "x-ms-cosmos-is-batch-request") }

// batch serves a transactional batch (x-ms-cosmos-batch-atomic absent or
// true) or a bulk request (false): 200 when every operation succeeded, 207
// Multi-Status when one failed, with one result per operation.
func (s *Server) batch(r *request, db, coll string) error {
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	ops, err := engine.ParseBatch(r.body)
	if err != nil {
		return err
	}
	atomic := !strings.EqualFold(strings.Trim(r.Header.Get("x-ms-cosmos-batch-atomic"), `"`), "false")
	res, err := s.eng.ExecuteBatch(&engine.BatchRequest{Database: db, Container: coll,
		PartitionKey: pk, HasPartitionKey: hasPK, Operations: ops, Atomic: atomic})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Failed {
		status = http.StatusMultiStatus
	}
	s.setSession(r)
	r.writeJSON(status, encodeBatchResults(ops, res.Results, r.preferMinimal()), "", res.Charge)
	return nil
}

// encodeBatchResults writes the results array. resourceBody is left out, not
// null, for deletes, failures and, under Prefer: return=minimal, for writes.
func encodeBatchResults(ops []engine.BatchOperation, results []engine.BatchOperationResult, minimal bool) []byte {
	b := make([]byte, 0, 64*len(results))
	b = append(b, '[')
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"statusCode":`...)
		b = strconv.AppendInt(b, int64(res.Status), 10)
		if res.SubStatus != 0 {
			b = append(b, `,"subStatusCode":`...)
			b = strconv.AppendInt(b, int64(res.SubStatus), 10)
		}
		b = append(b, `,"requestCharge":`...)
		b = append(b, formatCharge(res.Charge)...)
		if res.ETag != "" {
			b = append(b, `,"eTag":`...)
			b = appendJSONString(b, res.ETag)
		}
		if res.Body != nil && (!minimal || ops[i].Type == engine.BatchRead) {
			b = append(b, `,"resourceBody":`...)
			b = append(b, res.Body...)
		}
		if res.Message != "" {
			b = append(b, `,"message":`...)
			b = appendJSONString(b, res.Message)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
