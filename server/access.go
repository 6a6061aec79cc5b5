package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// Access is decided from what a request will do, never from what its
// headers claim: classify names the one operation a request performs (the
// same name picks the code that performs it), and the operations table says
// what that operation requires. A request whose operation has no complete
// row is refused, and TestEveryOperationHasAnAccessRow fails.

// operation is what a request does: a kind of resource and a verb.
type operation struct {
	kind string // account, dbs, colls, docs, pkranges, sprocs, triggers, udfs, users, permissions, clientencryptionkeys, offers
	verb string // read, list, query, queryplan, create, upsert, replace, patch, delete, execute, batch, bulk, changefeed
}

func (o operation) String() string { return o.kind + "." + o.verb }

// need is what a credential must grant for an operation.
type need int

const (
	needUnset need = iota
	// needRead: any credential that reaches the resource.
	needRead
	// needWrite: the master key, or an All token that reaches it.
	needWrite
	// needMaster: the master key alone (permissions carry resource tokens).
	needMaster
	// needPerOperation: batch and bulk; each operation needs read or write
	// by its type, checked before any runs.
	needPerOperation
	// needAdmin: the master key alone, for administrative calls (/_admin/).
	needAdmin
)

// reach is how far into the resource tree an operation acts, which decides
// the resource tokens that may authorize it.
type reach int

const (
	reachUnset reach = iota
	// reachAccount: the account document, which every SDK reads first.
	reachAccount
	// reachKeys: account-wide resources (databases feed, offers) and users
	// and permissions: the account's keys only, never a resource token.
	reachKeys
	// reachDatabase: a database, or its feed of containers.
	reachDatabase
	// reachDatabaseAny: what any credential of a database reads (its
	// client encryption keys), whatever in the database its permission is
	// on.
	reachDatabaseAny
	// reachContainer: a container or its scripts: a token must cover it
	// whole, not one partition or item of it.
	reachContainer
	// reachMetadata: what a client reads to address a container's items
	// (the container, its partition key ranges, a query plan); a token
	// restricted to one partition of it may read these.
	reachMetadata
	// reachPartition: items of one logical partition, which the partition
	// key header names (and the engine then confines the request to).
	reachPartition
	// reachOperations: batch and bulk; the engine checks the partition key
	// each operation resolves to.
	reachOperations
)

// route is a row of the operations table.
type route struct {
	need  need
	reach reach
	serve func(*Server, *request) error
}

// operations is the one table of what each operation requires, and the code
// that performs it.
var operations = map[operation]route{
	{"account", "read"}: {needRead, reachAccount, (*Server).account},

	{"dbs", "list"}:   {needRead, reachKeys, (*Server).listDatabases},
	{"dbs", "query"}:  {needRead, reachKeys, (*Server).queryDatabases},
	{"dbs", "create"}: {needWrite, reachKeys, (*Server).createDatabase},
	{"dbs", "read"}:   {needRead, reachDatabase, (*Server).readDatabase},
	{"dbs", "delete"}: {needWrite, reachDatabase, (*Server).deleteDatabase},

	{"colls", "list"}:    {needRead, reachDatabase, (*Server).listContainers},
	{"colls", "query"}:   {needRead, reachDatabase, (*Server).queryContainers},
	{"colls", "create"}:  {needWrite, reachDatabase, (*Server).createContainer},
	{"colls", "read"}:    {needRead, reachMetadata, (*Server).readContainer},
	{"colls", "replace"}: {needWrite, reachContainer, (*Server).replaceContainer},
	{"colls", "delete"}:  {needWrite, reachContainer, (*Server).deleteContainer},

	{"pkranges", "list"}: {needRead, reachMetadata, (*Server).partitionKeyRanges},

	{"conflicts", "list"}:   {needRead, reachMetadata, (*Server).listConflicts},
	{"conflicts", "query"}:  {needRead, reachMetadata, (*Server).listConflicts},
	{"conflicts", "read"}:   {needRead, reachMetadata, (*Server).conflict},
	{"conflicts", "delete"}: {needWrite, reachContainer, (*Server).conflict},
	// Deleting every item of a partition is a write on that partition.
	{"docs", "partitionkeydelete"}: {needWrite, reachPartition, (*Server).deleteAllItemsByPartitionKey},

	{"docs", "create"}:     {needWrite, reachPartition, (*Server).createItem},
	{"docs", "upsert"}:     {needWrite, reachPartition, (*Server).createItem},
	{"docs", "list"}:       {needRead, reachPartition, (*Server).readItemFeed},
	{"docs", "changefeed"}: {needRead, reachPartition, (*Server).changeFeed},
	{"docs", "query"}:      {needRead, reachPartition, (*Server).queryItems},
	{"docs", "queryplan"}:  {needRead, reachMetadata, (*Server).queryPlan},
	{"docs", "batch"}:      {needPerOperation, reachOperations, (*Server).batch},
	{"docs", "bulk"}:       {needPerOperation, reachOperations, (*Server).batch},
	{"docs", "read"}:       {needRead, reachPartition, (*Server).item},
	{"docs", "replace"}:    {needWrite, reachPartition, (*Server).item},
	{"docs", "patch"}:      {needWrite, reachPartition, (*Server).item},
	{"docs", "delete"}:     {needWrite, reachPartition, (*Server).item},

	{"sprocs", "list"}:    {needRead, reachContainer, (*Server).listScripts},
	{"sprocs", "query"}:   {needRead, reachContainer, (*Server).queryScripts},
	{"sprocs", "create"}:  {needWrite, reachContainer, (*Server).createScript},
	{"sprocs", "read"}:    {needRead, reachContainer, (*Server).readScript},
	{"sprocs", "replace"}: {needWrite, reachContainer, (*Server).replaceScript},
	{"sprocs", "delete"}:  {needWrite, reachContainer, (*Server).deleteScript},
	// A stored procedure may write whatever headers come with the POST.
	{"sprocs", "execute"}: {needWrite, reachPartition, (*Server).executeStoredProcedure},

	{"triggers", "list"}:    {needRead, reachContainer, (*Server).listScripts},
	{"triggers", "query"}:   {needRead, reachContainer, (*Server).queryScripts},
	{"triggers", "create"}:  {needWrite, reachContainer, (*Server).createScript},
	{"triggers", "read"}:    {needRead, reachContainer, (*Server).readScript},
	{"triggers", "replace"}: {needWrite, reachContainer, (*Server).replaceScript},
	{"triggers", "delete"}:  {needWrite, reachContainer, (*Server).deleteScript},

	{"udfs", "list"}:    {needRead, reachContainer, (*Server).listScripts},
	{"udfs", "query"}:   {needRead, reachContainer, (*Server).queryScripts},
	{"udfs", "create"}:  {needWrite, reachContainer, (*Server).createScript},
	{"udfs", "read"}:    {needRead, reachContainer, (*Server).readScript},
	{"udfs", "replace"}: {needWrite, reachContainer, (*Server).replaceScript},
	{"udfs", "delete"}:  {needWrite, reachContainer, (*Server).deleteScript},

	{"users", "list"}:    {needRead, reachKeys, (*Server).listUsers},
	{"users", "query"}:   {needRead, reachKeys, (*Server).queryUsers},
	{"users", "create"}:  {needWrite, reachKeys, (*Server).createUser},
	{"users", "upsert"}:  {needWrite, reachKeys, (*Server).createUser},
	{"users", "read"}:    {needRead, reachKeys, (*Server).readUser},
	{"users", "replace"}: {needWrite, reachKeys, (*Server).replaceUser},
	{"users", "delete"}:  {needWrite, reachKeys, (*Server).deleteUser},

	{"permissions", "list"}:    {needMaster, reachKeys, (*Server).listPermissions},
	{"permissions", "query"}:   {needMaster, reachKeys, (*Server).listPermissions},
	{"permissions", "create"}:  {needMaster, reachKeys, (*Server).createPermission},
	{"permissions", "upsert"}:  {needMaster, reachKeys, (*Server).createPermission},
	{"permissions", "read"}:    {needMaster, reachKeys, (*Server).readPermission},
	{"permissions", "replace"}: {needMaster, reachKeys, (*Server).replacePermission},
	{"permissions", "delete"}:  {needMaster, reachKeys, (*Server).deletePermission},

	// Any credential of the database reads its client encryption keys: a
	// client granted one container decrypts with them. Writing them takes
	// the account's keys.
	{"clientencryptionkeys", "list"}:    {needRead, reachDatabaseAny, (*Server).listEncryptionKeys},
	{"clientencryptionkeys", "query"}:   {needRead, reachDatabaseAny, (*Server).listEncryptionKeys},
	{"clientencryptionkeys", "read"}:    {needRead, reachDatabaseAny, (*Server).readEncryptionKey},
	{"clientencryptionkeys", "create"}:  {needWrite, reachKeys, (*Server).createEncryptionKey},
	{"clientencryptionkeys", "replace"}: {needWrite, reachKeys, (*Server).replaceEncryptionKey},

	{"offers", "list"}:    {needRead, reachKeys, (*Server).listOffers},
	{"offers", "query"}:   {needRead, reachKeys, (*Server).queryOffers},
	{"offers", "read"}:    {needRead, reachKeys, (*Server).readOffer},
	{"offers", "replace"}: {needWrite, reachKeys, (*Server).replaceOffer},

	// Fault rules (/_admin/faults), see admin.go.
	{"faults", "list"}:   {needAdmin, reachKeys, (*Server).listFaults},
	{"faults", "create"}: {needAdmin, reachKeys, (*Server).addFaults},
	{"faults", "clear"}:  {needAdmin, reachKeys, (*Server).clearFaults},
	{"faults", "read"}:   {needAdmin, reachKeys, (*Server).readFault},
	{"faults", "delete"}: {needAdmin, reachKeys, (*Server).deleteFault},
}

// target is what a request's path names, by the ids it was addressed with.
type target struct {
	db, coll string
	kind     engine.ScriptKind // scripts
	user     string            // users and permissions
	id       string            // the item, script, user, permission or offer
}

// grant is what the request's credential allows, once it is authorized.
type grant struct {
	write bool
	// partition, when partitioned, is the one logical partition the
	// credential reaches.
	partition   engine.PartitionKey
	partitioned bool
	// perm is the permission of a resource token.
	perm *engine.Permission
}

// feedVerb names a POST or GET on a feed of resources.
func feedVerb(r *http.Request, upsertable bool) (string, bool) {
	switch r.Method {
	case http.MethodGet:
		return "list", true
	case http.MethodPost:
		switch {
		case isQuery(r.Header):
			return "query", true
		case upsertable && headerBool(r.Header, "X-Ms-Documentdb-Is-Upsert"):
			return "upsert", true
		}
		return "create", true
	}
	return "", false
}

// resourceVerb names a request on one resource.
func resourceVerb(r *http.Request, verbs ...string) (string, bool) {
	var v string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		v = "read"
	case http.MethodPut:
		v = "replace"
	case http.MethodPatch:
		v = "patch"
	case http.MethodDelete:
		v = "delete"
	case http.MethodPost:
		v = "execute"
	}
	for _, allowed := range verbs {
		if v == allowed {
			return v, true
		}
	}
	return "", false
}

// classify names the operation a request performs and its target, or
// answers 400 (no such path: an *unknownPathError; or a resource the service
// has and Orrery does not serve) or 405 (no such method on it).
func classify(r *http.Request, segs []string) (operation, target, error) {
	var t target
	fail := func(status int) (operation, target, error) {
		if status == http.StatusNotFound {
			return operation{}, t, unknownPath(r)
		}
		return operation{}, t, methodNotAllowed(r)
	}
	pick := func(kind, verb string, ok bool) (operation, target, error) {
		if !ok {
			return fail(http.StatusMethodNotAllowed)
		}
		return operation{kind, verb}, t, nil
	}
	n := len(segs)
	if n == 0 {
		return pick("account", "read", r.Method == http.MethodGet || r.Method == http.MethodHead)
	}
	switch segs[0] {
	case adminPrefix:
		if n < 2 || segs[1] != "faults" || n > 3 {
			return fail(http.StatusNotFound)
		}
		if n == 2 {
			switch r.Method {
			case http.MethodGet:
				return pick("faults", "list", true)
			case http.MethodPost:
				return pick("faults", "create", true)
			case http.MethodDelete:
				return pick("faults", "clear", true)
			}
			return fail(http.StatusMethodNotAllowed)
		}
		t.id = segs[2]
		v, ok := resourceVerb(r, "read", "delete")
		return pick("faults", v, ok && r.Method != http.MethodHead)
	case "offers":
		switch n {
		case 1:
			v, ok := feedVerb(r, false)
			return pick("offers", v, ok && v != "create")
		case 2:
			t.id = segs[1]
			v, ok := resourceVerb(r, "read", "replace")
			return pick("offers", v, ok && r.Method != http.MethodHead)
		}
		return fail(http.StatusNotFound)
	case "dbs":
	default:
		return fail(http.StatusNotFound)
	}
	if n == 1 {
		v, ok := feedVerb(r, false)
		return pick("dbs", v, ok)
	}
	t.db = segs[1]
	if n == 2 {
		v, ok := resourceVerb(r, "read", "delete")
		return pick("dbs", v, ok)
	}
	if segs[2] == "users" {
		switch {
		case n == 3:
			v, ok := feedVerb(r, true)
			return pick("users", v, ok)
		case n == 4:
			t.id = segs[3]
			v, ok := resourceVerb(r, "read", "replace", "delete")
			return pick("users", v, ok)
		case segs[4] != "permissions" || n > 6:
			return fail(http.StatusNotFound)
		}
		t.user = segs[3]
		if n == 5 {
			v, ok := feedVerb(r, true)
			return pick("permissions", v, ok)
		}
		t.id = segs[5]
		v, ok := resourceVerb(r, "read", "replace", "delete")
		return pick("permissions", v, ok)
	}
	if segs[2] == "clientencryptionkeys" {
		switch n {
		case 3:
			v, ok := feedVerb(r, false)
			return pick("clientencryptionkeys", v, ok)
		case 4:
			// The service has no delete of a client encryption key.
			t.id = segs[3]
			v, ok := resourceVerb(r, "read", "replace")
			return pick("clientencryptionkeys", v, ok)
		}
		return fail(http.StatusNotFound)
	}
	if segs[2] != "colls" {
		if err := unsupportedChild("dbs", segs[2]); err != nil {
			return operation{}, t, err
		}
		return fail(http.StatusNotFound)
	}
	if n == 3 {
		v, ok := feedVerb(r, false)
		return pick("colls", v, ok)
	}
	t.coll = segs[3]
	if n == 4 {
		v, ok := resourceVerb(r, "read", "replace", "delete")
		return pick("colls", v, ok)
	}
	kind := segs[4]
	if err := unsupportedChild("colls", kind); err != nil {
		return operation{}, t, err
	}
	if kind == "docs" && n > 6 {
		if raw := splitPath(r.URL.EscapedPath()); len(raw) == 6 && strings.Contains(strings.ToUpper(raw[5]), "%2F") {
			// An id holding '/', encoded by the client and decoded here.
			return operation{}, t, checkItemID(strings.Join(segs[5:], "/"))
		}
		if err := unsupportedChild("docs", segs[6]); err != nil {
			return operation{}, t, err
		}
	}
	switch {
	case n > 6:
		return fail(http.StatusNotFound)
	case kind == "operations" && n == 6 && segs[5] == "partitionkeydelete":
		return pick("docs", "partitionkeydelete", r.Method == http.MethodPost)
	case kind == "pkranges" && n == 5:
		return pick("pkranges", "list", r.Method == http.MethodGet)
	case kind == "conflicts" && n == 5:
		v, ok := feedVerb(r, false)
		return pick("conflicts", v, ok && v != "create")
	case kind == "conflicts":
		t.id = segs[5]
		v, ok := resourceVerb(r, "read", "delete")
		return pick("conflicts", v, ok)
	case kind == "docs" && n == 5:
		switch r.Method {
		case http.MethodGet:
			if header(r.Header, "A-Im") != "" {
				return pick("docs", "changefeed", true)
			}
			return pick("docs", "list", true)
		case http.MethodPost:
			switch {
			case headerBool(r.Header, "X-Ms-Cosmos-Is-Query-Plan-Request"):
				return pick("docs", "queryplan", true)
			case isQuery(r.Header):
				return pick("docs", "query", true)
			case headerBool(r.Header, "X-Ms-Cosmos-Is-Batch-Request"):
				if strings.EqualFold(strings.Trim(header(r.Header, "X-Ms-Cosmos-Batch-Atomic"), `"`), "false") {
					return pick("docs", "bulk", true)
				}
				return pick("docs", "batch", true)
			case headerBool(r.Header, "X-Ms-Documentdb-Is-Upsert"):
				return pick("docs", "upsert", true)
			}
			return pick("docs", "create", true)
		}
		return fail(http.StatusMethodNotAllowed)
	case kind == "docs":
		t.id = segs[5]
		v, ok := resourceVerb(r, "read", "replace", "patch", "delete")
		return pick("docs", v, ok)
	}
	sk, ok := engine.ParseScriptKind(kind)
	if !ok {
		return fail(http.StatusNotFound)
	}
	t.kind = sk
	if n == 5 {
		v, ok := feedVerb(r, false)
		return pick(kind, v, ok)
	}
	t.id = segs[5]
	verbs := []string{"read", "replace", "delete"}
	if sk == engine.StoredProcedures {
		verbs = append(verbs, "execute")
	}
	v, ok := resourceVerb(r, verbs...)
	return pick(kind, v, ok)
}

// authorizeKey decides a request signed with one of the account's keys.
func authorizeKey(rt route, key access) (grant, *engine.Error) {
	switch {
	case key == accessAll:
		return grant{write: true}, nil
	case rt.need == needMaster:
		return grant{}, engine.Forbidden("Permissions carry resource tokens, which only the master key may obtain: sign permission requests with the master key.")
	case rt.need == needAdmin:
		return grant{}, engine.Forbidden("Administrative calls need the master key.")
	case rt.need == needWrite:
		return grant{}, engine.Forbidden("The read-only key can read but not write: sign write requests with the master key.")
	case rt.need == needRead || rt.need == needPerOperation:
		return grant{}, nil
	}
	return grant{}, noAccessRow()
}

func noAccessRow() *engine.Error {
	return &engine.Error{Status: 500, Code: "InternalServerError", Message: "The server has no access rule for this operation."}
}

// authorizeToken checks that the permission behind a verified resource
// token still exists and grants the operation: a mode that allows it, a
// resource at or above the one addressed, and, when it names a partition
// key, an operation confined to that partition.
func (s *Server) authorizeToken(r *request, rt route, tok *resourceToken) (grant, *engine.Error) {
	ctx := r.Context()
	perm, err := s.eng.PermissionByRID(ctx, tok.permissionRID)
	if err != nil {
		if engine.StatusOf(err) == http.StatusNotFound {
			return grant{}, unauthorized("The resource token's permission no longer exists: it was deleted, or its user or database was.")
		}
		return grant{}, &engine.Error{Status: 500, Code: "InternalServerError", Message: err.Error()}
	}
	g := grant{write: perm.Mode == engine.PermissionAll, partition: perm.PartitionKey, partitioned: perm.HasPartitionKey, perm: perm}
	switch rt.need {
	case needRead, needPerOperation:
	case needWrite:
		if !g.write {
			return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q grants Read access to %q, and this request (%s) writes.", perm.ID, perm.Link, r.op))
		}
	case needMaster:
		return grant{}, insufficientPermissions("users and permissions are managed with the master key, not a resource token.")
	case needAdmin:
		return grant{}, insufficientPermissions("administrative calls need the master key, not a resource token.")
	default:
		return grant{}, noAccessRow()
	}
	switch rt.reach {
	case reachAccount:
		return g, nil
	case reachKeys:
		return grant{}, insufficientPermissions(fmt.Sprintf("%s is served to the account's keys only, not to a resource token.", r.op))
	case reachDatabaseAny:
		permSegs, perr := engine.ParseResourceLink(perm.Link)
		if perr != nil {
			return grant{}, insufficientPermissions(perr.Message)
		}
		if !linkCovers(s.eng.ResolveLink(ctx, permSegs[:2]), s.eng.ResolveLink(ctx, r.segs)) {
			return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q is on %q, outside the database of %q.", perm.ID, perm.Link, strings.Join(r.segs, "/")))
		}
		return g, nil
	case reachDatabase, reachContainer, reachMetadata, reachPartition, reachOperations:
	default:
		return grant{}, noAccessRow()
	}
	permSegs, perr := engine.ParseResourceLink(perm.Link)
	if perr != nil {
		return grant{}, insufficientPermissions(perr.Message)
	}
	if !linkCovers(s.eng.ResolveLink(ctx, permSegs), s.eng.ResolveLink(ctx, r.segs)) {
		return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q covers %q, not %q.", perm.ID, perm.Link, strings.Join(r.segs, "/")))
	}
	if !g.partitioned {
		return g, nil
	}
	switch rt.reach {
	case reachPartition:
		pk, has, err := r.partitionKey()
		if err != nil {
			return grant{}, engine.BadRequest("%v", err)
		}
		if !has || !pk.Equal(perm.PartitionKey) {
			return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q covers the partition key %s only.", perm.ID, perm.PartitionKey))
		}
	case reachOperations:
		// An atomic batch runs in the partition of its header, bulk
		// operations each in their own: the engine refuses any outside
		// g.partition.
		if pk, has, err := r.partitionKey(); err != nil {
			return grant{}, engine.BadRequest("%v", err)
		} else if has && !pk.Equal(perm.PartitionKey) {
			return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q covers the partition key %s only.", perm.ID, perm.PartitionKey))
		}
	case reachMetadata:
	default:
		return grant{}, insufficientPermissions(fmt.Sprintf("the permission %q covers the partition key %s of %q, and %s acts on the whole container.", perm.ID, perm.PartitionKey, perm.Link, r.op))
	}
	return g, nil
}

// linkCovers reports whether the request path req addresses the granted
// resource or something below it. Both are resolved to RIDs where they
// name databases and containers.
func linkCovers(granted, req []string) bool {
	if len(req) < len(granted) {
		return false
	}
	for i, s := range granted {
		if req[i] != s {
			return false
		}
	}
	return true
}
