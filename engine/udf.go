package engine

import (
	"context"
	"encoding/json"

	"github.com/orrery-db/orrery/engine/script"
)

// The user-defined functions a query calls, read from the container's
// scripts and run on the script runtime (queries, and queries inside a
// stored procedure).

// udfRuntime is what a query's user-defined functions need: their stored
// bodies, the script runtime and the counters of script runs. Open gives
// it; it holds no engine.
type udfRuntime struct {
	// read returns the user-defined function id of c from the store.
	read func(ctx context.Context, c *Container, id string) (script.UDF, error)
	// runner is the script runtime, started on first use.
	runner func() *script.Runner
	runs   *scriptCounters
}

// udfResolver calls a container's user-defined functions for one query.
type udfResolver struct {
	rt udfRuntime
	c  *Container
	// ctx cancels the calls: the stored procedure's, for its queries.
	ctx     context.Context
	session *script.UDFSession
	udfs    map[string]script.UDF
}

// resolver returns the resolver of c's user-defined functions for one
// query, whose calls end with ctx.
func (rt udfRuntime) resolver(ctx context.Context, c *Container) *udfResolver {
	return &udfResolver{rt: rt, c: c, ctx: ctx, udfs: map[string]script.UDF{}}
}

// Call calls udf.name with JSON arguments.
func (u *udfResolver) Call(name string, args []json.RawMessage) (json.RawMessage, error) {
	fn, ok := u.udfs[name]
	if !ok {
		var err error
		fn, err = u.rt.read(u.ctx, u.c, name)
		if StatusOf(err) == 404 {
			// The query package's wording for a UDF it cannot resolve.
			return nil, BadRequest("Unknown function 'udf.%s'. The container has no user-defined function with that id.", name)
		}
		if err != nil {
			return nil, err
		}
		u.udfs[name] = fn
	}
	if u.session == nil {
		s, err := u.rt.runner().NewUDFSession(u.ctx)
		if err != nil {
			return nil, scriptError(err)
		}
		u.session = s
	}
	out, err := u.session.Call(fn, args)
	u.rt.runs.count(kindUDF, err)
	return out, scriptError(err)
}

func (u *udfResolver) close() {
	if u.session != nil {
		u.session.Close()
	}
}
