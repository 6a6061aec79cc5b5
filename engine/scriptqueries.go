package engine

import (
	"context"
	"strings"

	"github.com/orrery-db/orrery/storage"
)

// procedureQueries runs a script's queries (scriptQueries) on the query
// runner: Open hands it to the script host once the runner is made.
type procedureQueries struct{ qr *queryRunner }

func (q procedureQueries) queryInPartition(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest) (*QueryResult, error) {
	if strings.Contains(strings.ToLower(req.Query), "udf.") {
		udfs := q.qr.udfs.resolver(ctx, c)
		defer udfs.close()
		req.UDF = udfs
	}
	return q.qr.queryIn(ctx, c, r, scope, req, nil, pageBounds{})
}
