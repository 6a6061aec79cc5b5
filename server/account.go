package server

import (
	"encoding/json"
	"net/http"
)

// queryEngineConfiguration is a JSON string holding JSON, as the service sends it.
const queryEngineConfiguration = `{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5,"maxLogicalAndPerSqlQuery":500,"maxLogicalOrPerSqlQuery":500,"maxUdfRefPerSqlQuery":10,"maxInExpressionItemsCount":16000,"queryMaxInMemorySortDocumentCount":500,"maxQueryRequestTimeoutFraction":0.9,"sqlAllowNonFiniteNumbers":false,"sqlAllowAggregateFunctions":true,"sqlAllowSubQuery":true,"sqlAllowScalarSubQuery":true,"allowNewKeywords":true,"sqlAllowLike":true,"sqlAllowGroupByClause":true,"maxSpatialQueryCells":12,"spatialMaxGeometryPointCount":256,"sqlDisableOptimizationFlags":0,"sqlAllowTop":true,"enableSpatialIndexing":true}`

// account answers GET / with the database account document. Its endpoints are
// built from the host and scheme the client used, because the SDKs send every
// later request to them.
func (s *Server) account(r *request) error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	endpoint := scheme + "://" + r.Host + "/"
	loc := []map[string]any{{"name": "South Central US", "databaseAccountEndpoint": endpoint}}
	doc := map[string]any{
		"_self": "", "id": "orrery", "_rid": "orrery",
		"media": "//media/", "addresses": "//addresses/", "_dbs": "//dbs/",
		"writableLocations":            loc,
		"readableLocations":            loc,
		"enableMultipleWriteLocations": false,
		"userReplicationPolicy":        map[string]any{"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"userConsistencyPolicy":        map[string]any{"defaultConsistencyLevel": "Session"},
		"systemReplicationPolicy":      map[string]any{"minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"readPolicy":                   map[string]any{"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
		"queryEngineConfiguration":     queryEngineConfiguration,
	}
	body, _ := json.Marshal(doc)
	r.w.Header().Set("X-Ms-Max-Media-Storage-Usage-Mb", "10240")
	r.w.Header().Set("X-Ms-Media-Storage-Usage-Mb", "0")
	r.writeJSON(http.StatusOK, body, "", 0)
	return nil
}
