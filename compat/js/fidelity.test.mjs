// What the JavaScript SDK sees where Orrery follows the service's gateway
// or lacks what the service has: ids ending with whitespace (the SDK encodes
// the trailing spaces, the gateway answers 401) or holding control
// characters (refused in front of the gateway), scripts compiled at create,
// and 400s that name the unsupported feature.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

describe("request fidelity", () => {
  let database, container;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jsfidelity") }));
    ({ container } = await database.containers.create({ id: "c", partitionKey: { paths: ["/pk"] } }));
  });

  after(async () => {
    await database.delete();
  });

  test("an id ending with whitespace is created, then 401 when addressed, as in the service's gateway", async () => {
    for (const id of ["Test ", "Test   "]) {
      const created = await container.items.create({ id, pk: "ws" });
      assert.equal(created.statusCode, 201);
      const read = await expectCosmosError(() => container.item(id, "ws").read());
      assert.equal(read.code, 401, `read ${JSON.stringify(id)}`);
      assert.match(read.message, /ends with whitespace/);
      const replaced = await expectCosmosError(() => container.item(id, "ws").replace({ id, pk: "ws", v: 2 }));
      assert.equal(replaced.code, 401);
      const deleted = await expectCosmosError(() => container.item(id, "ws").delete());
      assert.equal(deleted.code, 401);
    }
    const { resources } = await container.items
      .query("SELECT VALUE c.id FROM c ORDER BY c.id", { partitionKey: "ws" })
      .fetchAll();
    assert.deepEqual(resources, ["Test ", "Test   "]);
  });

  test("an id holding a carriage return, line feed or tab is created, then refused in front of the gateway: the SDK fails without a status", async () => {
    for (const id of ["With\rCarriageReturn", "With\tTab", "With\nLineFeed"]) {
      const created = await container.items.create({ id, pk: "ctl" });
      assert.equal(created.statusCode, 201);
      // The service's HTTP front end answers 400 with an HTML page; the SDK
      // parses every error body as JSON and fails on the client, with no
      // code, as the SDK's own suite records for the service.
      for (const [what, op] of [
        ["read", () => container.item(id, "ctl").read()],
        ["replace", () => container.item(id, "ctl").replace({ id, pk: "ctl", v: 2 })],
        ["delete", () => container.item(id, "ctl").delete()],
      ]) {
        const err = await expectCosmosError(op);
        assert.equal(err.code, undefined, `${what} ${JSON.stringify(id)}: ${err.message}`);
        assert.ok(err instanceof SyntaxError, `${what} ${JSON.stringify(id)}: ${err}`);
      }
    }
    const { resources } = await container.items
      .query("SELECT VALUE c.id FROM c ORDER BY c.id", { partitionKey: "ctl" })
      .fetchAll();
    assert.deepEqual(resources, ["With\tTab", "With\nLineFeed", "With\rCarriageReturn"]);
  });

  test("a stored procedure with a syntax error is refused at create with its line", async () => {
    const err = await expectCosmosError(() =>
      container.scripts.storedProcedures.create({ id: "broken", body: "function broken() {\n  var x = ;\n}" }),
    );
    assert.equal(err.code, 400);
    assert.match(err.message, /SyntaxError: Unexpected token ; at line 2, column 11 of broken/);
    const missing = await expectCosmosError(() => container.scripts.storedProcedure("broken").read());
    assert.equal(missing.code, 404);
  });
});
