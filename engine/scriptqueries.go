package engine

import (
	"context"

	"github.com/orrery-db/orrery/storage"
)

// procedureQueries runs a script's queries (scriptQueries) on the query
// runner: Open hands it to the script host once the runner is made.
type procedureQueries struct{ qr *queryRunner }

func (q procedureQueries) queryInPartition(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest) (*QueryResult, error) {
	if req.UDF == nil && containsUDFCall(req.Query) {
		udfs := q.qr.udfs.resolver(ctx, c)
		defer udfs.close()
		req.UDF = udfs
	}
	return q.qr.queryIn(ctx, c, r, scope, req, nil, pageBounds{})
}
