package engine

import (
	"context"
	"encoding/json"

	"github.com/orrery-db/orrery/engine/script"
)

// The user-defined functions a query calls, read from the container's
// scripts and run on the script runtime (queries, and queries inside a
// stored procedure).

// udfResolver calls a container's user-defined functions for one query.
type udfResolver struct {
	e *Engine
	c *Container
	// ctx cancels the calls: the stored procedure's, for its queries.
	ctx     context.Context
	session *script.UDFSession
	udfs    map[string]script.UDF
}

func (e *Engine) newUDFResolver(ctx context.Context, c *Container) *udfResolver {
	return &udfResolver{e: e, c: c, ctx: ctx, udfs: map[string]script.UDF{}}
}

// Call calls udf.name with JSON arguments.
func (u *udfResolver) Call(name string, args []json.RawMessage) (json.RawMessage, error) {
	fn, ok := u.udfs[name]
	if !ok {
		props, _, err := readScript(u.ctx, u.e.store, u.c, UserFunctions, name)
		if StatusOf(err) == 404 {
			// The query package's wording for a UDF it cannot resolve.
			return nil, BadRequest("Unknown function 'udf.%s'. The container has no user-defined function with that id.", name)
		}
		if err != nil {
			return nil, err
		}
		fn = scriptOf(props)
		u.udfs[name] = fn
	}
	if u.session == nil {
		s, err := u.e.scripts.runner().NewUDFSession(u.ctx)
		if err != nil {
			return nil, scriptError(err)
		}
		u.session = s
	}
	out, err := u.session.Call(fn, args)
	u.e.scripts.runs.count(kindUDF, err)
	return out, scriptError(err)
}

func (u *udfResolver) close() {
	if u.session != nil {
		u.session.Close()
	}
}
