package engine

import (
	"context"
	"strings"

	"github.com/orrery-db/orrery/storage"
)

// procedureQueries runs a script's queries (scriptQueries) on the engine's
// query work: Open hands it to the script host, which holds no engine.
type procedureQueries struct{ e *Engine }

func (q procedureQueries) queryInPartition(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest) (*QueryResult, error) {
	if strings.Contains(strings.ToLower(req.Query), "udf.") {
		udfs := q.e.newUDFResolver(ctx, c)
		defer udfs.close()
		req.UDF = udfs
	}
	return q.e.queryIn(ctx, c, r, scope, req, nil, pageBounds{})
}
