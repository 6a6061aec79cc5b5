// Time to live through the JavaScript SDK: the container's defaultTtl and the
// item's ttl decide when an item disappears from reads and readAll.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { newClient, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsttl") }));
});
after(async () => {
  await db.delete();
});

test("defaultTtl and item ttl decide expiry", async () => {
  // Every case is written first, then one wait covers them all: an item with
  // a 1 s lifetime is gone 2 s later, since _ts has one-second resolution.
  const cases = [
    { name: "TTL off: the item's ttl is ignored", defaultTtl: undefined, ttl: 1, survives: true },
    { name: "TTL on (-1), no item ttl: never expires", defaultTtl: -1, ttl: undefined, survives: true },
    { name: "TTL on (-1), item ttl 1: expires", defaultTtl: -1, ttl: 1, survives: false },
    { name: "defaultTtl 1, no item ttl: expires", defaultTtl: 1, ttl: undefined, survives: false },
    { name: "defaultTtl 1, item ttl -1: never expires", defaultTtl: 1, ttl: -1, survives: true },
    { name: "defaultTtl 1, item ttl 3600: outlives the default", defaultTtl: 1, ttl: 3600, survives: true },
  ];
  for (const c of cases) {
    const def = { id: uniqueId("ttl"), partitionKey: { paths: ["/pk"] } };
    if (c.defaultTtl !== undefined) def.defaultTtl = c.defaultTtl;
    const { container, resource } = await db.containers.create(def);
    assert.equal(resource.defaultTtl, c.defaultTtl, c.name);
    const body = { id: "item", pk: "p" };
    if (c.ttl !== undefined) body.ttl = c.ttl;
    const created = await container.items.create(body);
    assert.equal(created.resource.ttl, c.ttl, `${c.name}: the ttl property is kept in the body`);
    c.container = container;
  }
  await sleep(2100);
  for (const c of cases) {
    const read = await c.container.item("item", "p").read();
    assert.equal(read.statusCode, c.survives ? 200 : 404, c.name);
    const { resources } = await c.container.items.readAll().fetchAll();
    assert.equal(resources.length, c.survives ? 1 : 0, `${c.name}: readAll`);
  }
});

test("an item's ttl of null, 0 or below -1 is refused with 400, as the service refuses it", async () => {
  const { container } = await db.containers.create({ id: uniqueId("ttlbad"), partitionKey: { paths: ["/pk"] }, defaultTtl: 5 });
  for (const ttl of [null, 0, -10, 1.5]) {
    await assert.rejects(container.items.create({ id: uniqueId("bad"), pk: "p", ttl }), (err) => {
      assert.equal(err.code, 400, `ttl ${ttl}`);
      return true;
    });
  }
  const { resource } = await container.items.create({ id: uniqueId("ok"), pk: "p", ttl: -1 });
  assert.equal(resource.ttl, -1);
});
