// Microsoft Entra ID (AAD) tokens through the JavaScript SDK's
// aadCredentials: a server that verifies tokens (ORRERY_AAD_ENDPOINT, https)
// grants "js-writer" the Data Contributor role and "js-reader" the Data
// Reader role on the account. The suite signs its tokens (RS256) with the
// issuer's key the Go test hands it; a forged signature, a wrong audience
// and an expired token are refused with 401, a reader writing with 403.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPrivateKey, generateKeyPairSync, sign } from "node:crypto";
import { CosmosClient } from "@azure/cosmos";
import { expectCosmosError, uniqueId } from "./orrery.mjs";

const endpoint = process.env.ORRERY_AAD_ENDPOINT;
const signingKey = createPrivateKey(process.env.ORRERY_AAD_SIGNING_KEY ?? "");
const forgedKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;

const b64url = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

/** Signs an RS256 JWT with key. */
function jwt(claims, key = signingKey) {
  const head = b64url({ alg: "RS256", typ: "JWT", kid: process.env.ORRERY_AAD_KID });
  const body = b64url(claims);
  const sig = sign("RSA-SHA256", Buffer.from(`${head}.${body}`), key).toString("base64url");
  return `${head}.${body}.${sig}`;
}

/**
 * A TokenCredential (the interface of @azure/identity's credentials) that
 * mints a token for principal oid and the audience of the scope the SDK
 * asks for; edit changes the claims, key signs.
 */
function credential(oid, edit = () => {}, key = signingKey) {
  return {
    async getToken(scopes) {
      const scope = Array.isArray(scopes) ? scopes[0] : scopes;
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        aud: scope.replace(/\/\.default$/, ""),
        iss: process.env.ORRERY_AAD_ISSUER,
        oid,
        sub: oid,
        nbf: now - 5,
        iat: now,
        exp: now + 3600,
      };
      edit(claims);
      return { token: jwt(claims, key), expiresOnTimestamp: claims.exp * 1000 };
    },
  };
}

const aadClient = (cred) => new CosmosClient({ endpoint, aadCredentials: cred });

describe("Entra ID tokens (aadCredentials)", () => {
  const master = new CosmosClient({ endpoint, key: process.env.ORRERY_KEY });
  const dbId = uniqueId("jsaad");
  let writer, reader;

  before(async () => {
    const { database } = await master.databases.create({ id: dbId });
    await database.containers.create({ id: "c", partitionKey: { paths: ["/pk"] } });
    writer = aadClient(credential("js-writer")).database(dbId).container("c");
    reader = aadClient(credential("js-reader")).database(dbId).container("c");
  });

  after(async () => {
    await master.database(dbId).delete();
  });

  test("a Data Contributor creates, reads, replaces, patches, queries and deletes", async () => {
    const created = await writer.items.create({ id: "1", pk: "a", n: 1 });
    assert.equal(created.statusCode, 201);
    await writer.items.upsert({ id: "2", pk: "a", n: 2 });
    const { resource } = await writer.item("1", "a").read();
    assert.equal(resource.n, 1);
    await writer.item("1", "a").replace({ id: "1", pk: "a", n: 10 });
    await writer.item("2", "a").patch([{ op: "incr", path: "/n", value: 5 }]);
    const { resources } = await writer.items
      .query({ query: "SELECT VALUE c.n FROM c WHERE c.pk = @pk ORDER BY c.id", parameters: [{ name: "@pk", value: "a" }] }, { partitionKey: "a" })
      .fetchAll();
    assert.deepEqual(resources, [10, 7]);
    const cross = await writer.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll();
    assert.deepEqual(cross.resources, [2]);
    const del = await writer.item("2", "a").delete();
    assert.equal(del.statusCode, 204);
    const container = await writer.read();
    assert.equal(container.resource.id, "c");
  });

  test("managing databases and containers is refused to a principal", async () => {
    const client = aadClient(credential("js-writer"));
    const db = await expectCosmosError(() => client.databases.create({ id: uniqueId("jsaadno") }));
    assert.equal(db.code, 403);
    assert.match(db.message, /does not have required RBAC permissions.*sqlDatabases\/write/);
    const coll = await expectCosmosError(() => client.database(dbId).containers.create({ id: "c2", partitionKey: { paths: ["/pk"] } }));
    assert.equal(coll.code, 403);
  });

  test("a Data Reader reads and queries, and cannot write", async () => {
    await writer.items.upsert({ id: "r", pk: "b", n: 1 });
    const { resource } = await reader.item("r", "b").read();
    assert.equal(resource.n, 1);
    const { resources } = await reader.items.query("SELECT VALUE c.id FROM c WHERE c.pk = 'b'", { partitionKey: "b" }).fetchAll();
    assert.deepEqual(resources, ["r"]);
    const write = await expectCosmosError(() => reader.items.create({ id: "no", pk: "b" }));
    assert.equal(write.code, 403);
    const replace = await expectCosmosError(() => reader.item("r", "b").replace({ id: "r", pk: "b", n: 99 }));
    assert.equal(replace.code, 403);
    const after = await writer.item("r", "b").read();
    assert.equal(after.resource.n, 1);
  });

  for (const [name, cred] of [
    ["a forged signature", credential("js-writer", () => {}, forgedKey)],
    ["a wrong audience", credential("js-writer", (c) => (c.aud = "https://storage.azure.com"))],
    ["an expired token", credential("js-writer", (c) => {
      c.nbf -= 7200;
      c.exp = Math.floor(Date.now() / 1000) - 600;
    })],
  ]) {
    test(`${name} is refused with 401`, async () => {
      const c = aadClient(cred).database(dbId).container("c");
      const err = await expectCosmosError(() => c.items.create({ id: uniqueId("x"), pk: "z" }));
      assert.equal(err.code, 401, err.message);
      const { resources } = await writer.items.query("SELECT * FROM c WHERE c.pk = 'z'", { partitionKey: "z" }).fetchAll();
      assert.deepEqual(resources, []);
    });
  }
});
