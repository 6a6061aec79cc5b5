// Server-side JavaScript through the JavaScript SDK: stored procedures
// (the seeds' addOrder and appendValue, rollback, error text, console.log),
// pre- and post-triggers named by a write, a UDF inside a query, and the
// CRUD of the three script resources with their ETags.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { TriggerOperation, TriggerType } from "@azure/cosmos";
import { expectCosmosError, newClient, quotedEtag, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;
let orders;

// Seed 001, Question 4: addOrder.js, verbatim.
const addOrder = `function addOrder(order) {
    var ctx = getContext();
    var coll = ctx.getCollection();
    var ok = coll.createDocument(coll.getSelfLink(), order,
        function (err, doc) {
            if (err) throw err;              // throw = roll back
            ctx.getResponse().setBody(doc.id);
        });
    if (!ok) throw new Error("not accepted, try again");
}`;

// Seed 001, Question 4: the pre-trigger, verbatim.
const stampCreated = `// pre-trigger: runs only when the write names it
function stampCreated() {
    var req = getContext().getRequest();
    var doc = req.getBody();
    doc.createdAt = new Date().toISOString();
    req.setBody(doc);
}`;

// Seed 001, Question 4: the UDF, verbatim.
const tax = `// UDF: called only inside a query
function tax(total) {
    return total * 0.08;
}`;

// Seed 003: the stored procedure, verbatim (comments included).
const appendValue = `function appendValue(id, pkey, newValue) {
    var collection = getContext().getCollection();
    var response = getContext().getResponse();
    
    // 查询目标文档
    var query = "SELECT * FROM c WHERE c.id = @id AND c.pkey = @pkey";
    var parameters = [
        {name: "@id", value: id},
        {name: "@pkey", value: pkey}
    ];
    
    collection.queryDocuments(collection.getSelfLink(), query, {parameters: parameters}, function(err, docs) {
        if (err) throw err;
        
        if (docs.length > 0) {
            // 文档存在，追加value
            var doc = docs[0];
            doc.value.push(newValue);
            collection.replaceDocument(doc._self, doc, function(err, updatedDoc) {
                if (err) throw err;
                response.setBody(updatedDoc);
            });
        } else {
            // 文档不存在，创建新文档
            var newDoc = {
                id: id,
                pkey: pkey,
                value: [newValue]
            };
            collection.createDocument(collection.getSelfLink(), newDoc, function(err, createdDoc) {
                if (err) throw err;
                response.setBody(createdDoc);
            });
        }
    });
}`;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsscripts") }));
  ({ container: orders } = await db.containers.create({ id: "orders", partitionKey: { paths: ["/customerId"] } }));
});
after(async () => {
  await db.delete();
});

/** Returns the ids of the items of one partition, sorted. */
async function idsIn(container, pk) {
  const { resources } = await container.items.query("SELECT VALUE c.id FROM c", { partitionKey: pk }).fetchAll();
  return resources.sort();
}

describe("stored procedures", () => {
  test("seed 001: addOrder registers, lists and creates o9", async () => {
    const created = await orders.scripts.storedProcedures.create({ id: "addOrder", body: addOrder });
    assert.equal(created.statusCode, 201);
    const { resources: listed } = await orders.scripts.storedProcedures.readAll().fetchAll();
    assert.ok(listed.some((s) => s.id === "addOrder"), JSON.stringify(listed.map((s) => s.id)));

    const result = await orders.scripts
      .storedProcedure("addOrder")
      .execute("c1", [{ id: "o9", customerId: "c1", total: 30.5 }]);
    assert.equal(result.statusCode, 200);
    assert.equal(result.resource, "o9");
    const { resource: o9 } = await orders.item("o9", "c1").read();
    assert.equal(o9.total, 30.5);

    // A second run conflicts inside the script: its throw is a 409, not a 400.
    const err = await expectCosmosError(() =>
      orders.scripts.storedProcedure("addOrder").execute("c1", [{ id: "o9", customerId: "c1", total: 1 }]),
    );
    assert.equal(err.code, 409);
    const { resource: still } = await orders.item("o9", "c1").read();
    assert.equal(still.total, 30.5);
  });

  test("seed 003: 20 concurrent clients append to an item that does not exist yet", async () => {
    const { container } = await db.containers.create({ id: uniqueId("values"), partitionKey: { paths: ["/pkey"] } });
    await container.scripts.storedProcedures.create({ id: "appendValue", body: appendValue });
    const id = uniqueId("doc");
    const writers = Array.from({ length: 20 }, (_, i) => ({ value: `v${i}`, client: newClient() }));
    const results = await Promise.all(
      writers.map(({ value, client: c }) =>
        c.database(db.id).container(container.id).scripts.storedProcedure("appendValue").execute("p1", [id, "p1", value]),
      ),
    );
    for (const r of results) {
      assert.equal(r.statusCode, 200);
      assert.equal(r.resource.id, id);
    }
    assert.deepEqual(await idsIn(container, "p1"), [id]);
    const { resource } = await container.item(id, "p1").read();
    assert.deepEqual([...resource.value].sort(), writers.map((w) => w.value).sort());
    // Every run saw the one before it: the answers hold 1, 2, …, 20 values.
    assert.deepEqual(
      results.map((r) => r.resource.value.length).sort((a, b) => a - b),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
  });

  test("a procedure that writes twice and then throws leaves nothing, and its error text reaches the client", async () => {
    const body = `function writeTwiceThenThrow(prefix) {
      var coll = getContext().getCollection();
      coll.createDocument(coll.getSelfLink(), { id: prefix + "-1", customerId: "rb" });
      coll.createDocument(coll.getSelfLink(), { id: prefix + "-2", customerId: "rb" }, function (err) {
        if (err) throw err;
        throw new Error("refusing order " + prefix + " after two writes");
      });
    }`;
    await orders.scripts.storedProcedures.create({ id: "writeTwiceThenThrow", body });
    const err = await expectCosmosError(() =>
      orders.scripts.storedProcedure("writeTwiceThenThrow").execute("rb", ["x7"]),
    );
    assert.equal(err.code, 400);
    assert.match(err.message, /refusing order x7 after two writes/);
    assert.deepEqual(await idsIn(orders, "rb"), []);
  });

  test("getContext().abort and a thrown ErrorCodes number keep their text and status", async () => {
    const cases = [
      ["abortWithText", `function abortWithText() { getContext().abort(new Error("stopped by abort")); }`, 400, /stopped by abort/],
      ["throwString", `function throwString() { throw "a plain string"; }`, 400, /a plain string/],
      ["throwConflict", `function throwConflict() { throw new Error(ErrorCodes.Conflict, "seat taken"); }`, 409, /seat taken/],
    ];
    for (const [id, body, status, text] of cases) {
      await orders.scripts.storedProcedures.create({ id, body });
      const err = await expectCosmosError(() => orders.scripts.storedProcedure(id).execute("c1", []));
      assert.equal(err.code, status, id);
      assert.match(err.message, text, id);
    }
  });

  test("console.log is returned only when script logging is enabled", async () => {
    const body = `function logs(n) {
      console.log("got %s items (*all* of them!)", n);
      console.log("done");
      getContext().getResponse().setBody(n);
    }`;
    await orders.scripts.storedProcedures.create({ id: "logs", body });
    const sp = orders.scripts.storedProcedure("logs");
    const logged = await sp.execute("c1", [3], { enableScriptLogging: true });
    assert.equal(logged.resource, 3);
    // The service encodes the log as encodeURIComponent does (a space is
    // %20, never +), and the SDK hands the header over as it came.
    const log = logged.headers["x-ms-documentdb-script-log-results"];
    assert.equal(log, encodeURIComponent("got 3 items (*all* of them!)\ndone"), JSON.stringify(logged.headers));
    const quiet = await sp.execute("c1", [3]);
    assert.equal(quiet.headers["x-ms-documentdb-script-log-results"], undefined);
  });

  test("a replaced procedure runs its new body", async () => {
    const sp = orders.scripts.storedProcedure("version");
    await orders.scripts.storedProcedures.create({ id: "version", body: `function v() { getContext().getResponse().setBody(1); }` });
    assert.equal((await sp.execute("c1", [])).resource, 1);
    await sp.replace({ id: "version", body: `function v() { getContext().getResponse().setBody(2); }` });
    assert.equal((await sp.execute("c1", [])).resource, 2);
  });
});

describe("triggers", () => {
  before(async () => {
    await orders.scripts.triggers.create({
      id: "stampCreated",
      body: stampCreated,
      triggerType: TriggerType.Pre,
      triggerOperation: TriggerOperation.Create,
    });
  });

  test("seed 001: stampCreated stamps only the write that names it", async () => {
    const before = Date.now();
    const named = await orders.items.create({ id: uniqueId("t"), customerId: "tr", total: 5 }, { preTriggerInclude: ["stampCreated"] });
    const plain = await orders.items.create({ id: uniqueId("t"), customerId: "tr", total: 6 });
    assert.equal(typeof named.resource.createdAt, "string");
    const stamped = Date.parse(named.resource.createdAt);
    assert.ok(stamped >= before - 1000 && stamped <= Date.now() + 1000, named.resource.createdAt);
    assert.equal(plain.resource.createdAt, undefined);
    const { resource: stored } = await orders.item(named.item.id, "tr").read();
    assert.equal(stored.createdAt, named.resource.createdAt);
    const { resource: storedPlain } = await orders.item(plain.item.id, "tr").read();
    assert.equal(storedPlain.createdAt, undefined);
  });

  test("a create-only trigger named on an upsert is refused", async () => {
    const err = await expectCosmosError(() =>
      orders.items.upsert({ id: uniqueId("t"), customerId: "tr" }, { preTriggerInclude: ["stampCreated"] }),
    );
    assert.equal(err.code, 400);
  });

  test("a post-trigger that throws leaves the item unwritten", async () => {
    await orders.scripts.triggers.create({
      id: "rejectAll",
      body: `function rejectAll() {
        var doc = getContext().getResponse().getBody();
        throw new Error("post-trigger rejected " + doc.id);
      }`,
      triggerType: TriggerType.Post,
      triggerOperation: TriggerOperation.All,
    });
    const id = uniqueId("post");
    const err = await expectCosmosError(() =>
      orders.items.create({ id, customerId: "pt" }, { postTriggerInclude: ["rejectAll"] }),
    );
    assert.equal(err.code, 400);
    assert.match(err.message, new RegExp(`post-trigger rejected ${id}`));
    const missing = await orders.item(id, "pt").read();
    assert.equal(missing.statusCode, 404);
    assert.deepEqual(await idsIn(orders, "pt"), []);
  });

  test("a post-trigger that writes another item commits with the write", async () => {
    await orders.scripts.triggers.create({
      id: "audit",
      body: `function audit() {
        var coll = getContext().getCollection();
        var doc = getContext().getResponse().getBody();
        var ok = coll.createDocument(coll.getSelfLink(), { id: "audit-" + doc.id, customerId: doc.customerId },
          function (err) { if (err) throw err; });
        if (!ok) throw new Error("not accepted");
      }`,
      triggerType: TriggerType.Post,
      triggerOperation: TriggerOperation.Create,
    });
    const id = uniqueId("a");
    await orders.items.create({ id, customerId: "au" }, { postTriggerInclude: ["audit"] });
    assert.deepEqual(await idsIn(orders, "au"), [`audit-${id}`, id].sort());
  });
});

describe("user-defined functions", () => {
  test("seed 001: udf.tax in a SELECT with a partition key", async () => {
    await orders.scripts.userDefinedFunctions.create({ id: "tax", body: tax });
    const items = [
      { id: "q1", customerId: "ux", total: 20.5 },
      { id: "q2", customerId: "ux", total: 12.5 },
      { id: "q3", customerId: "uy", total: 99 },
    ];
    for (const it of items) await orders.items.create(it);
    const { resources } = await orders.items
      .query("SELECT c.id, udf.tax(c.total) AS tax FROM c", { partitionKey: "ux" })
      .fetchAll();
    assert.deepEqual(
      resources.sort((a, b) => a.id.localeCompare(b.id)),
      [
        { id: "q1", tax: 20.5 * 0.08 },
        { id: "q2", tax: 12.5 * 0.08 },
      ],
    );
  });

  test("a stored procedure's query calls the container's UDFs", async () => {
    await orders.scripts.userDefinedFunctions.create({ id: "net", body: "function (total) { return total * 0.92; }" });
    for (const [id, total] of [["n1", 50], ["n2", 12.5]]) await orders.items.create({ id, customerId: "un", total });
    await orders.scripts.storedProcedures.create({
      id: "netTotals",
      body: `function netTotals() {
        var coll = getContext().getCollection();
        var ok = coll.queryDocuments(coll.getSelfLink(), "SELECT VALUE udf.net(r.total) FROM r ORDER BY r.id",
          function (err, values) { if (err) throw err; getContext().getResponse().setBody(values); });
        if (!ok) throw new Error("not accepted");
      }`,
    });
    const { resource } = await orders.scripts.storedProcedure("netTotals").execute("un", []);
    assert.deepEqual(resource, [50 * 0.92, 12.5 * 0.92]);
  });

  test("an unknown UDF is a 400 naming it", async () => {
    const err = await expectCosmosError(() =>
      orders.items.query("SELECT udf.nope(c.total) FROM c", { partitionKey: "ux" }).fetchAll(),
    );
    assert.equal(err.code, 400);
    assert.match(err.message, /nope/);
  });
});

describe("script resources", () => {
  const kinds = [
    ["storedProcedures", "storedProcedure", { body: "function () { }" }],
    ["triggers", "trigger", { body: "function () { }", triggerType: TriggerType.Pre, triggerOperation: TriggerOperation.All }],
    ["userDefinedFunctions", "userDefinedFunction", { body: "function (x) { return x; }" }],
  ];
  for (const [plural, singular, def] of kinds) {
    test(`${plural}: create, read, list, replace with ETags, delete`, async () => {
      const { container } = await db.containers.create({ id: uniqueId(plural), partitionKey: { paths: ["/pk"] } });
      const created = await container.scripts[plural].create({ id: "s1", ...def });
      assert.equal(created.statusCode, 201);
      assert.match(created.etag, quotedEtag);
      for (const p of ["_rid", "_self", "_etag", "_ts"]) assert.ok(created.resource[p], p);
      const dup = await expectCosmosError(() => container.scripts[plural].create({ id: "s1", ...def }));
      assert.equal(dup.code, 409);

      const read = await container.scripts[singular]("s1").read();
      assert.equal(read.resource.id, "s1");
      assert.equal(read.etag, created.etag);
      assert.equal(read.resource.body, def.body);

      await container.scripts[plural].create({ id: "s2", ...def });
      const { resources: listed } = await container.scripts[plural].readAll().fetchAll();
      assert.deepEqual(listed.map((s) => s.id).sort(), ["s1", "s2"]);

      const newBody = def.body.replace("{ }", "{ return 7; }").replace("return x;", "return x + 1;");
      const replaced = await container.scripts[singular]("s1").replace(
        { id: "s1", ...def, body: newBody },
        { accessCondition: { type: "IfMatch", condition: created.etag } },
      );
      assert.equal(replaced.statusCode, 200);
      assert.notEqual(replaced.etag, created.etag);
      assert.equal(replaced.resource.body, newBody);
      const stale = await expectCosmosError(() =>
        container.scripts[singular]("s1").replace(
          { id: "s1", ...def },
          { accessCondition: { type: "IfMatch", condition: created.etag } },
        ),
      );
      assert.equal(stale.code, 412);
      assert.equal((await container.scripts[singular]("s1").read()).resource.body, newBody);

      const deleted = await container.scripts[singular]("s1").delete();
      assert.equal(deleted.statusCode, 204);
      const gone = await expectCosmosError(() => container.scripts[singular]("s1").read());
      assert.equal(gone.code, 404);
      const { resources: after } = await container.scripts[plural].readAll().fetchAll();
      assert.deepEqual(after.map((s) => s.id), ["s2"]);
      await container.delete();
    });
  }
});

describe("trigger bodies", () => {
  test("a trigger's body is kept as sent and compiled only when a write names it", async () => {
    const id = uniqueId("loose");
    const { resource } = await orders.scripts.triggers.create({
      id,
      body: "serverScript() { var x = 10; }",
      triggerType: TriggerType.Pre,
      triggerOperation: TriggerOperation.All,
    });
    assert.equal(resource.body, "serverScript() { var x = 10; }");
    const err = await expectCosmosError(() =>
      orders.items.create({ id: uniqueId("t"), customerId: "tr" }, { preTriggerInclude: [id] }),
    );
    assert.equal(err.code, 400);
    assert.match(err.message, /compiling Javascript/);
  });
});
