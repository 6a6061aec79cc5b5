// Users, permissions and resource tokens through the JavaScript SDK: a
// master client grants a user Read on one container and All on another; a
// client holding only the permissions' tokens can do what they grant and
// nothing else, until a token expires or its permission is deleted.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { PermissionMode } from "@azure/cosmos";
import { expectCosmosError, newClient, newClientWith, quotedEtag, uniqueId } from "./orrery.mjs";

const client = newClient();

describe("users and permissions", () => {
  let database, readable, writable, hidden, user;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jsperm") }));
    ({ container: readable } = await database.containers.create({ id: "readable", partitionKey: { paths: ["/pk"] } }));
    ({ container: writable } = await database.containers.create({ id: "writable", partitionKey: { paths: ["/pk"] } }));
    ({ container: hidden } = await database.containers.create({ id: "hidden", partitionKey: { paths: ["/pk"] } }));
    await readable.items.create({ id: "r1", pk: "a", n: 1 });
    await readable.items.create({ id: "r2", pk: "b", n: 2 });
    await hidden.items.create({ id: "h1", pk: "a" });
    ({ user } = await database.users.create({ id: "alice" }));
  });

  after(async () => {
    await database.delete();
  });

  test("user create, read, list, upsert, replace and conflicts", async () => {
    const read = await user.read();
    assert.equal(read.statusCode, 200);
    assert.equal(read.resource.id, "alice");
    assert.equal(read.resource._permissions, "permissions/");
    assert.match(read.etag, quotedEtag);
    for (const key of ["_rid", "_self", "_ts"]) {
      assert.ok(key in read.resource, `user body lacks ${key}: ${JSON.stringify(read.resource)}`);
    }
    const dup = await expectCosmosError(() => database.users.create({ id: "alice" }));
    assert.equal(dup.code, 409);
    const upserted = await database.users.upsert({ id: "bob" });
    assert.equal(upserted.statusCode, 201);
    const again = await database.users.upsert({ id: "bob" });
    assert.equal(again.statusCode, 200);
    assert.equal(again.resource._rid, upserted.resource._rid);
    const stale = await expectCosmosError(() =>
      database.user("bob").replace({ id: "bob" }, { accessCondition: { type: "IfMatch", condition: upserted.etag } }),
    );
    assert.equal(stale.code, 412);
    const { resources } = await database.users.readAll().fetchAll();
    assert.deepEqual(resources.map((u) => u.id).sort(), ["alice", "bob"]);
    await database.user("bob").delete();
    const gone = await expectCosmosError(() => database.user("bob").read());
    assert.equal(gone.code, 404);
  });

  test("a replace with another id renames a user or a permission, as the service does", async () => {
    const { user: carol } = await database.users.create({ id: "carol" });
    const { resource: perm } = await carol.permissions.create({ id: "p-old", permissionMode: PermissionMode.Read, resource: readable.url });
    const renamedPerm = await carol.permission("p-old").replace({ id: "p-new", permissionMode: PermissionMode.All, resource: readable.url });
    assert.equal(renamedPerm.resource.id, "p-new");
    assert.equal(renamedPerm.resource._rid, perm._rid);
    // The mode comes back as the client spelled it (the SDK's enum is
    // lower case), and grants what it says.
    assert.equal(renamedPerm.resource.permissionMode, PermissionMode.All);
    assert.equal((await expectCosmosError(() => carol.permission("p-old").read())).code, 404);

    const renamedUser = await database.user("carol").replace({ id: "carol 2" });
    assert.equal(renamedUser.resource.id, "carol 2");
    assert.equal((await expectCosmosError(() => database.user("carol").read())).code, 404);
    // The permissions follow the user, and their tokens still work.
    const { resource: moved } = await database.user("carol 2").permission("p-new").read();
    assert.equal(moved._rid, perm._rid);
    const scoped = newClientWith({ resourceTokens: { [readable.url]: moved._token } });
    const { resource: item } = await scoped.database(database.id).container("readable").item("r1", "a").read();
    assert.equal(item.n, 1);
    // A rename onto an existing id is a conflict.
    await database.users.create({ id: "erin" });
    assert.equal((await expectCosmosError(() => database.user("erin").replace({ id: "carol 2" }))).code, 409);
  });

  test("resource tokens grant what their permissions say", async () => {
    const { resource: readPerm } = await user.permissions.create({
      id: "read-readable",
      permissionMode: PermissionMode.Read,
      resource: readable.url,
    });
    const { resource: allPerm, statusCode } = await user.permissions.create({
      id: "all-writable",
      permissionMode: PermissionMode.All,
      resource: writable.url,
    });
    assert.equal(statusCode, 201);
    for (const p of [readPerm, allPerm]) {
      assert.match(p._token, /^type=resource&ver=1\.0&sig=/);
      assert.ok(p._rid && p._self && p._etag, `permission body ${JSON.stringify(p)}`);
    }
    const invalid = await expectCosmosError(() =>
      user.permissions.create({ id: "bad", permissionMode: PermissionMode.Read, resource: "not/a/link/x/y" }),
    );
    assert.equal(invalid.code, 400);
    const { resources: feed } = await user.permissions.readAll().fetchAll();
    assert.deepEqual(feed.map((p) => p.id).sort(), ["all-writable", "read-readable"]);
    assert.ok(feed.every((p) => p._token), "every listed permission carries a token");

    const byTokens = newClientWith({
      resourceTokens: { [readable.url]: readPerm._token, [writable.url]: allPerm._token },
    });
    const byFeed = newClientWith({ permissionFeed: feed });
    for (const [name, c] of [["resourceTokens", byTokens], ["permissionFeed", byFeed]]) {
      const items = c.database(database.id).container(readable.id).items;
      const { resource: r1, statusCode: readStatus } = await c.database(database.id).container(readable.id).item("r1", "a").read();
      assert.equal(readStatus, 200, name);
      assert.equal(r1.n, 1, name);
      const { resources } = await items.query("SELECT c.id FROM c ORDER BY c.id").fetchAll();
      assert.deepEqual(resources.map((d) => d.id), ["r1", "r2"], name);
      const { resources: inA } = await items.query("SELECT * FROM c", { partitionKey: "a" }).fetchAll();
      assert.deepEqual(inA.map((d) => d.id), ["r1"], name);

      const refused = await expectCosmosError(() => items.create({ id: `w-${name}`, pk: "a" }));
      assert.equal(refused.code, 403, `${name}: writing with a Read permission`);

      const target = c.database(database.id).container(writable.id);
      const created = await target.items.create({ id: `w-${name}`, pk: "a" });
      assert.equal(created.statusCode, 201, name);
      const replaced = await target.item(`w-${name}`, "a").replace({ id: `w-${name}`, pk: "a", v: 2 });
      assert.equal(replaced.resource.v, 2, name);
    }

    // A token presented for a container its permission does not cover.
    const misused = newClientWith({ resourceTokens: { [hidden.url]: readPerm._token } });
    const foreign = await expectCosmosError(() => misused.database(database.id).container(hidden.id).item("h1", "a").read());
    assert.equal(foreign.code, 403);
    // No token at all for the container: the SDK sends none it could use.
    const unlisted = await expectCosmosError(() => byTokens.database(database.id).container(hidden.id).item("h1", "a").read());
    assert.equal(unlisted.code, 401);
    // Users and permissions need the master key, whatever token is sent.
    const byDatabaseId = newClientWith({ resourceTokens: { [database.id]: allPerm._token } });
    const noUsers = await expectCosmosError(() => byDatabaseId.database(database.id).users.readAll().fetchAll());
    assert.equal(noUsers.code, 403);

    // Deleting the permission revokes its tokens.
    await user.permission("all-writable").delete();
    const revoked = await expectCosmosError(() =>
      byTokens.database(database.id).container(writable.id).items.create({ id: "after-revoke", pk: "a" }),
    );
    assert.equal(revoked.code, 401);
  });

  test("a token restricted to a partition key reaches that partition only", async () => {
    const { user: carol } = await database.users.create({ id: "carol" });
    const { resource: perm } = await carol.permissions.create({
      id: "pk-a",
      permissionMode: PermissionMode.All,
      resource: readable.url,
      resourcePartitionKey: ["a"],
    });
    assert.deepEqual(perm.resourcePartitionKey, ["a"]);
    const c = newClientWith({ resourceTokens: { [readable.url]: perm._token } }).database(database.id).container(readable.id);
    const { statusCode } = await c.items.create({ id: "pk-a-item", pk: "a" });
    assert.equal(statusCode, 201);
    const { resource } = await c.item("r1", "a").read();
    assert.equal(resource.id, "r1");
    const other = await expectCosmosError(() => c.item("r2", "b").read());
    assert.equal(other.code, 403);
    const otherWrite = await expectCosmosError(() => c.items.create({ id: "pk-b-item", pk: "b" }));
    assert.equal(otherWrite.code, 403);

    // Upserting the permission moves it to partition "b": its tokens follow.
    const upserted = await carol.permissions.upsert({
      id: "pk-a",
      permissionMode: PermissionMode.Read,
      resource: readable.url,
      resourcePartitionKey: ["b"],
    });
    assert.equal(upserted.statusCode, 200);
    assert.equal(upserted.resource._rid, perm._rid);
    assert.match(upserted.resource._token, /^type=resource&/);
    const { resource: r2 } = await c.item("r2", "b").read();
    assert.equal(r2.id, "r2");
    const nowRefused = await expectCosmosError(() => c.item("r1", "a").read());
    assert.equal(nowRefused.code, 403);
    const readOnly = await expectCosmosError(() => c.items.create({ id: "pk-b-item", pk: "b" }));
    assert.equal(readOnly.code, 403);
  });

  test("an expired token is refused with 401", async () => {
    const { user: dave } = await database.users.create({ id: "dave" });
    await dave.permissions.create({ id: "short", permissionMode: PermissionMode.Read, resource: readable.url });
    const tooLong = await expectCosmosError(() => dave.permission("short").read({ resourceTokenExpirySeconds: 18001 }));
    assert.equal(tooLong.code, 400);
    const { resource: perm } = await dave.permission("short").read({ resourceTokenExpirySeconds: 10 });
    const item = newClientWith({ resourceTokens: { [readable.url]: perm._token } })
      .database(database.id)
      .container(readable.id)
      .item("r1", "a");
    assert.equal((await item.read()).statusCode, 200);
    await sleep(11_000);
    const expired = await expectCosmosError(() => item.read());
    assert.equal(expired.code, 401);
  });
});
