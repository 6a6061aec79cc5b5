package engine

import (
	"context"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/storage"
)

// validateScript checks a script body and, for triggers, its type and operation.
func validateScript(kind ScriptKind, props map[string]any) *Error {
	body, ok := props["body"].(string)
	if !ok {
		return BadRequest("The script must have a body: a string holding a JavaScript function.")
	}
	// Procedures and functions are compiled at create and replace, as the
	// service does, so that a syntax error is answered here (400, with its
	// line) and not at the first run. A trigger's body is kept as sent and
	// compiled when a write names it: the service accepts any text for it.
	id, _ := props["id"].(string)
	if kind != Triggers {
		if err := script.Validate(id, body); err != nil {
			e, _ := AsError(scriptError(err))
			if e == nil {
				e = BadRequest("%v", err)
			}
			return e
		}
		return nil
	}
	tt, _ := props["triggerType"].(string)
	switch strings.ToLower(tt) {
	case "pre":
		props["triggerType"] = "Pre"
	case "post":
		props["triggerType"] = "Post"
	default:
		return BadRequest("The trigger type %q is invalid: it must be Pre or Post.", tt)
	}
	op, _ := props["triggerOperation"].(string)
	for _, known := range []string{"All", "Create", "Replace", "Delete", "Update", "Upsert"} {
		if strings.EqualFold(op, known) {
			props["triggerOperation"] = known
			return nil
		}
	}
	return BadRequest("The trigger operation %q is invalid: it must be All, Create, Replace, Delete or Upsert.", op)
}

// decodeScript parses and checks the body of a script's create or replace.
func decodeScript(kind ScriptKind, body []byte) (map[string]any, error) {
	props, _, perr := decodeResource(body)
	if perr != nil {
		return nil, perr
	}
	stripSystem(props)
	if err := validateScript(kind, props); err != nil {
		return nil, err
	}
	return props, nil
}

// changeInContainer runs fn on container db/coll (by names or RIDs)
// holding the catalog for a change.
func changeInContainer[T any](ctx context.Context, cat *catalog, db, coll string, fn func(c *Container) (T, error)) (T, error) {
	var zero T
	if err := cat.catMu.Lock(ctx); err != nil {
		return zero, err
	}
	defer cat.catMu.Unlock()
	c, err := cat.lookupContainer(db, coll)
	if err != nil {
		return zero, err
	}
	return fn(c)
}

// CreateScript creates a stored procedure, trigger or user-defined function.
func (e *Engine) CreateScript(ctx context.Context, db, coll string, kind ScriptKind, body []byte) (*Resource, error) {
	props, err := decodeScript(kind, body)
	if err != nil {
		return nil, err
	}
	return changeInContainer(ctx, &e.catalog, db, coll, func(c *Container) (*Resource, error) {
		res, _, err := e.createChild(ctx, scriptsOf(c, kind), props, false)
		return res, err
	})
}

// ReadScript returns a script by id or RID.
func (e *Engine) ReadScript(ctx context.Context, db, coll string, kind ScriptKind, id string) (*Resource, error) {
	c, err := e.Container(ctx, db, coll)
	if err != nil {
		return nil, err
	}
	props, raw, err := readScript(ctx, e.store, c, kind, id)
	if err != nil {
		return nil, err
	}
	return childResource(props, raw), nil
}

// ListScripts returns a container's scripts of one kind, ordered by id.
func (e *Engine) ListScripts(ctx context.Context, db, coll string, kind ScriptKind) ([]*Resource, error) {
	c, err := e.Container(ctx, db, coll)
	if err != nil {
		return nil, err
	}
	list, _, err := scriptsOf(c, kind).list(ctx, e.store)
	return list, err
}

// ReplaceScript replaces a script's body (and a trigger's type and operation).
func (e *Engine) ReplaceScript(ctx context.Context, db, coll string, kind ScriptKind, id string, body []byte, ifMatch string) (*Resource, error) {
	props, err := decodeScript(kind, body)
	if err != nil {
		return nil, err
	}
	return changeInContainer(ctx, &e.catalog, db, coll, func(c *Container) (*Resource, error) {
		return e.replaceChild(ctx, scriptsOf(c, kind), id, props, ifMatch)
	})
}

// DeleteScript deletes a script.
func (e *Engine) DeleteScript(ctx context.Context, db, coll string, kind ScriptKind, id string, ifMatch string) error {
	_, err := changeInContainer(ctx, &e.catalog, db, coll, func(c *Container) (struct{}, error) {
		return struct{}{}, e.deleteChild(ctx, scriptsOf(c, kind), id, ifMatch, nil)
	})
	return err
}

// scriptsOf returns the scripts of one kind of a container.
func scriptsOf(c *Container, kind ScriptKind) childSet {
	return childSet{kind: kind.singular(), prefix: keys.ChildPrefix(c.rid, string(kind)), self: c.Self() + string(kind) + "/",
		ridLen: 16, salt: 0xFFFF,
		newRID: func(_ context.Context, lsn uint64) ([]byte, error) { return rids.Child(c.rid, lsn<<16|0xFFFF), nil }}
}

// readScript returns a script's stored props, by id or RID.
func readScript(ctx context.Context, r storage.Reader, c *Container, kind ScriptKind, id string) (map[string]any, []byte, error) {
	return scriptsOf(c, kind).read(ctx, r, id)
}

// ExecuteStoredProcedure runs a stored procedure in one logical partition,
// as one transaction: all its writes commit together, or none does when it
// throws, runs out of time or memory.
func (e *Engine) ExecuteStoredProcedure(ctx context.Context, req *ExecuteRequest) (*ExecuteResult, error) {
	return e.scripts.executeProcedure(ctx, req)
}
