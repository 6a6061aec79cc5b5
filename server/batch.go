package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// batch serves a transactional batch (x-ms-cosmos-batch-atomic absent or
// true) or a bulk request (false): 200 when every operation succeeded, 207
// Multi-Status when one failed, with one result per operation. A credential
// that cannot write may send only reads; one confined to a partition
// reaches only it, whatever partition key each operation names.
func (s *Server) batch(r *request) error {
	ctx := r.Context()
	atomic := r.op.verb == "batch"
	// An atomic batch checks the cached container against the store with
	// its own locks; a bulk request's operations look it up each.
	lookup := s.containerOf
	if atomic {
		lookup = s.itemContainerOf
	}
	if _, err := lookup(r); err != nil {
		return err
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	ops, err := engine.ParseBatch(r.body)
	if err != nil {
		return err
	}
	if !r.grant.write {
		for i, op := range ops {
			if op.Type != engine.BatchRead {
				return engine.Forbidden("Insufficient permissions provided in the authorization header for the corresponding request: operation %d (%s) writes, and the credential grants reads only.", i, op.Type)
			}
		}
	}
	res, err := s.eng.ExecuteBatch(ctx, &engine.BatchRequest{Database: r.t.db, Container: r.t.coll,
		PartitionKey: pk, HasPartitionKey: hasPK, Operations: ops, Atomic: atomic,
		Confined: r.grant.partitioned, Partition: r.grant.partition,
		StopOnError: !atomic && strings.EqualFold(strings.Trim(header(r.Header, "X-Ms-Cosmos-Batch-Continue-On-Error"), `"`), "false")})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Failed {
		status = http.StatusMultiStatus
	}
	if err := s.setResultSession(r, res.SessionLSN); err != nil {
		return err
	}
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
