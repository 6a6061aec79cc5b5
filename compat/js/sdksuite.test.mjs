// Cases of the JavaScript SDK's own public suite (test/public) that the
// server answers, written again here as the service answers them.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { PartitionKeyKind } from "@azure/cosmos";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

describe("partition key paths", () => {
  let db;
  before(async () => {
    ({ database: db } = await client.databases.create({ id: uniqueId("jspkpaths") }));
  });
  after(async () => {
    await db.delete();
  });

  test("a partition key path naming anything but letters, digits and '_' unquoted is refused with the service's 400", async () => {
    for (const partitionKey of [
      { paths: ["/id ds"] },
      { paths: ["/user-id"] },
      { paths: ["/a//b"] },
      { paths: ["/a/*"] },
      { paths: ["id", "/id2"], kind: PartitionKeyKind.MultiHash, version: 2 },
      { paths: ["/tenant", "/id ds"], kind: PartitionKeyKind.MultiHash, version: 2 },
    ]) {
      const err = await expectCosmosError(() => db.containers.create({ id: uniqueId("c"), partitionKey }));
      assert.equal(err.code, 400, `${JSON.stringify(partitionKey)}: ${err.message}`);
      assert.ok(
        err.message.includes("Partition key paths must contain only valid characters and not contain a trailing slash or wildcard character"),
        err.message,
      );
      const first = partitionKey.paths.find((p) => !/^(\/[A-Za-z0-9_]+)+$/.test(p));
      assert.ok(
        err.message.includes(`The partition key component definition path '${first}' could not be accepted`),
        err.message,
      );
    }
  });

  test("quoted, nested and hierarchical partition key paths are accepted as sent", async () => {
    for (const partitionKey of [
      { paths: ['/"user-id"'] },
      { paths: ["/address/zip_code"] },
      { paths: ["/tenant", "/user", "/session"], kind: PartitionKeyKind.MultiHash, version: 2 },
    ]) {
      const { resource } = await db.containers.create({ id: uniqueId("c"), partitionKey });
      assert.deepEqual(resource.partitionKey.paths, partitionKey.paths);
    }
  });
});
