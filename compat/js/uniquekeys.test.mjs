// Unique key policies through the JavaScript SDK: enforced on item writes
// and inside stored procedures (a script that writes a duplicate fails with
// 409 and its earlier writes are rolled back).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

const addTwo = `function addTwo(a, b) {
  var c = getContext().getCollection();
  var ok = c.createDocument(c.getSelfLink(), a, function (err) {
    if (err) throw err;
    var ok2 = c.createDocument(c.getSelfLink(), b, function (err2) {
      if (err2) throw err2;
      getContext().getResponse().setBody("both");
    });
    if (!ok2) throw new Error("not accepted");
  });
  if (!ok) throw new Error("not accepted");
}`;

describe("unique keys", () => {
  let database, container;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jsunique") }));
    ({ container } = await database.containers.create({
      id: "users",
      partitionKey: { paths: ["/pk"] },
      uniqueKeyPolicy: { uniqueKeys: [{ paths: ["/email"] }] },
    }));
    await container.scripts.storedProcedures.create({ id: "addTwo", body: addTwo });
  });

  after(async () => {
    await database.delete();
  });

  test("a second item with the same email in a partition is a 409", async () => {
    await container.items.create({ id: "1", pk: "a", email: "x@y" });
    const dup = await expectCosmosError(() => container.items.create({ id: "2", pk: "a", email: "x@y" }));
    assert.equal(dup.code, 409);
    assert.match(dup.message, /Unique index constraint violation/);
    const other = await container.items.create({ id: "2", pk: "b", email: "x@y" });
    assert.equal(other.statusCode, 201);
    const { resource } = await container.read();
    assert.deepEqual(resource.uniqueKeyPolicy.uniqueKeys, [{ paths: ["/email"] }]);
  });

  test("a stored procedure writing a duplicate fails whole", async () => {
    const sproc = container.scripts.storedProcedure("addTwo");
    const ok = await sproc.execute("s", [{ id: "s1", pk: "s", email: "s1@y" }, { id: "s2", pk: "s", email: "s2@y" }]);
    assert.equal(ok.resource, "both");
    const err = await expectCosmosError(() =>
      sproc.execute("s", [{ id: "s3", pk: "s", email: "s3@y" }, { id: "s4", pk: "s", email: "s1@y" }]),
    );
    assert.equal(err.code, 409, err.message);
    const { resources } = await container.items.query("SELECT VALUE c.id FROM c", { partitionKey: "s" }).fetchAll();
    assert.deepEqual(resources.sort(), ["s1", "s2"]);
  });
});
