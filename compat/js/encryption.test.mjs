// Always Encrypted through the JavaScript SDK's own client-side encryption:
// client encryption keys (/dbs/{db}/clientencryptionkeys), containers'
// clientEncryptionPolicy, and items whose encrypted values the server
// stores as the opaque strings the SDK sends, which only a client holding
// the key encryption key reads back. The key encryption keys live in a
// small resolver of the test's own (RSA-OAEP key pairs in memory) in place
// of a key vault.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, privateDecrypt, publicEncrypt, constants, randomUUID } from "node:crypto";
import {
  CosmosClient,
  CosmosEncryptedNumberType,
  EncryptionAlgorithm,
  EncryptionQueryBuilder,
  EncryptionType,
  PermissionMode,
} from "@azure/cosmos";
import { expectCosmosError, newClient, quotedEtag, uniqueId } from "./orrery.mjs";

const resolverName = "ORRERY_TEST_VAULT";

/** A key resolver holding one RSA key pair per key encryption key name. */
class TestKeyResolver {
  encryptionKeyResolverName = resolverName;
  pairs = new Map();
  revoked = new Set();

  pair(id) {
    if (this.revoked.has(id)) {
      const err = new Error(`the key encryption key ${id} is revoked`);
      err.statusCode = 403;
      throw err;
    }
    if (!this.pairs.has(id)) {
      this.pairs.set(id, generateKeyPairSync("rsa", { modulusLength: 2048 }));
    }
    return this.pairs.get(id);
  }

  async wrapKey(id, _algorithm, key) {
    return new Uint8Array(publicEncrypt({ key: this.pair(id).publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING }, key));
  }

  async unwrapKey(id, _algorithm, wrapped) {
    return new Uint8Array(privateDecrypt({ key: this.pair(id).privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING }, wrapped));
  }
}

// The resolver is shared by every encrypting client, as one key vault is.
const resolver = new TestKeyResolver();

function encryptingClient(auth) {
  return new CosmosClient({
    endpoint: process.env.ORRERY_ENDPOINT,
    ...(auth ?? { key: process.env.ORRERY_KEY }),
    clientEncryptionOptions: { keyEncryptionKeyResolver: resolver },
  });
}

function kek(name, value) {
  return { type: resolverName, name, value, algorithm: "RSA-OAEP" };
}

function encrypted(path, key, type = EncryptionType.DETERMINISTIC) {
  return { path, clientEncryptionKeyId: key, encryptionType: type, encryptionAlgorithm: EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256 };
}

const plain = newClient();

describe("client encryption keys", () => {
  let client, database;

  before(async () => {
    client = encryptingClient();
    ({ database } = await client.databases.create({ id: uniqueId("jscek") }));
  });

  after(async () => {
    await database.delete();
    client.dispose();
  });

  test("a key is created once, read, and rewrapped under its ETag", async () => {
    const created = await database.createClientEncryptionKey("cek1", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("kek1", "kek1-v1"));
    assert.equal(created.statusCode, 201);
    assert.match(created.resource._etag, quotedEtag);
    assert.deepEqual(created.resource.keyWrapMetadata, kek("kek1", "kek1-v1"));
    for (const k of ["_rid", "_self", "_ts", "wrappedDataEncryptionKey"]) {
      assert.ok(k in created.resource, `the key lacks ${k}: ${JSON.stringify(created.resource)}`);
    }
    const again = await expectCosmosError(() =>
      database.createClientEncryptionKey("cek1", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("kek1", "kek1-v2")),
    );
    assert.equal(again.code, 409);
    const read = await database.readClientEncryptionKey("cek1");
    assert.equal(read.statusCode, 200);
    assert.equal(read.resource.wrappedDataEncryptionKey, created.resource.wrappedDataEncryptionKey);
    const rewrapped = await database.rewrapClientEncryptionKey("cek1", kek("kek1", "kek1-v2"));
    assert.equal(rewrapped.statusCode, 200);
    assert.equal(rewrapped.resource._rid, created.resource._rid);
    assert.notEqual(rewrapped.resource._etag, created.resource._etag);
    assert.notEqual(rewrapped.resource.wrappedDataEncryptionKey, created.resource.wrappedDataEncryptionKey);
    assert.equal((await database.readClientEncryptionKey("cek1")).resource.keyWrapMetadata.value, "kek1-v2");
    const missing = await expectCosmosError(() => database.readClientEncryptionKey("nope"));
    assert.equal(missing.code, 404);
  });

  test("a resource token on a container cannot create or rewrap the database's keys", async () => {
    await database.createClientEncryptionKey("cek3", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("kek3", "kek3-v1"));
    const { container } = await database.containers.create({
      id: "granted",
      partitionKey: { paths: ["/PK"] },
      clientEncryptionPolicy: { includedPaths: [encrypted("/secret", "cek3")], policyFormatVersion: 2 },
    });
    const { user } = await database.users.create({ id: randomUUID() });
    const { resource: perm } = await user.permissions.create({ id: "all", permissionMode: PermissionMode.All, resource: container.url });
    // Keyed by the database's id, the token signs every request under it,
    // as the SDK's own suite has it.
    const restricted = encryptingClient({ resourceTokens: { [database.id]: perm._token } });
    const restrictedDb = restricted.database(database.id);
    const create = await expectCosmosError(() =>
      restrictedDb.createClientEncryptionKey("cek4", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("kek4", "kek4-v1")),
    );
    assert.equal(create.code, 403);
    const rewrap = await expectCosmosError(() => restrictedDb.rewrapClientEncryptionKey("cek3", kek("kek3", "kek3-v2")));
    assert.equal(rewrap.code, 403);
    restricted.dispose();
  });
});

describe("client encryption policy", () => {
  let database;

  before(async () => {
    ({ database } = await plain.databases.create({ id: uniqueId("jscep") }));
  });

  after(async () => {
    await database.delete();
  });

  test("the service's rules on paths, types and format versions are answered 400", async () => {
    const bad = {
      "a relative path": { includedPaths: [encrypted("a", "k")], policyFormatVersion: 2 },
      "a nested path": { includedPaths: [encrypted("/a/b", "k")], policyFormatVersion: 2 },
      "a duplicate path": { includedPaths: [encrypted("/a", "k"), encrypted("/a", "k2")], policyFormatVersion: 2 },
      "no key id": { includedPaths: [encrypted("/a", "")], policyFormatVersion: 2 },
      "format version 3": { includedPaths: [encrypted("/a", "k")], policyFormatVersion: 3 },
      "an unknown encryption type": { includedPaths: [encrypted("/a", "k", "Plain")], policyFormatVersion: 2 },
      "a randomized partition key": { includedPaths: [encrypted("/PK", "k", EncryptionType.RANDOMIZED)], policyFormatVersion: 2 },
      "a randomized id": { includedPaths: [encrypted("/id", "k", EncryptionType.RANDOMIZED)], policyFormatVersion: 2 },
      "the partition key under version 1": { includedPaths: [encrypted("/PK", "k")], policyFormatVersion: 1 },
      "the id under version 1": { includedPaths: [encrypted("/id", "k")] },
    };
    for (const [name, clientEncryptionPolicy] of Object.entries(bad)) {
      const err = await expectCosmosError(() =>
        database.containers.create({ id: uniqueId("bad"), partitionKey: { paths: ["/PK"] }, clientEncryptionPolicy }),
      );
      assert.equal(err.code, 400, `${name}: ${err.message}`);
    }
    const { resource } = await database.containers.create({
      id: "good",
      partitionKey: { paths: ["/PK"] },
      clientEncryptionPolicy: { includedPaths: [encrypted("/PK", "k"), encrypted("/secret", "k", EncryptionType.RANDOMIZED)], policyFormatVersion: 2 },
    });
    assert.equal(resource.clientEncryptionPolicy.policyFormatVersion, 2);
    assert.deepEqual(resource.clientEncryptionPolicy.includedPaths.map((p) => p.path), ["/PK", "/secret"]);
  });
});

describe("encrypted items", () => {
  let client, database, container;
  const policy = {
    includedPaths: [
      encrypted("/id", "ceka"),
      encrypted("/PK", "ceka"),
      encrypted("/ssn", "ceka"),
      encrypted("/salary", "cekb"),
      encrypted("/address", "cekb"),
      encrypted("/notes", "cekb", EncryptionType.RANDOMIZED),
    ],
    policyFormatVersion: 2,
  };

  function person(pk) {
    return {
      id: randomUUID(),
      PK: pk ?? randomUUID(),
      ssn: `ssn-${randomUUID().slice(0, 8)}`,
      salary: 1234.5,
      address: { city: "Oslo", zip: 150 },
      notes: ["a", "b"],
      nonsensitive: randomUUID(),
    };
  }

  before(async () => {
    client = encryptingClient();
    ({ database } = await client.databases.create({ id: uniqueId("jsenc") }));
    await database.createClientEncryptionKey("ceka", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("keka", "keka-v1"));
    await database.createClientEncryptionKey("cekb", EncryptionAlgorithm.AEAD_AES_256_CBC_HMAC_SHA256, kek("kekb", "kekb-v1"));
    ({ container } = await database.containers.create({ id: "people", partitionKey: { paths: ["/PK"] }, clientEncryptionPolicy: policy }));
    await container.initializeEncryption();
  });

  after(async () => {
    await database.delete();
    client.dispose();
  });

  test("the server stores what the SDK encrypted, and the SDK reads it back", async () => {
    const doc = person();
    const created = await container.items.create(doc);
    assert.equal(created.statusCode, 201);
    assert.equal(created.resource.ssn, doc.ssn);
    const read = await container.item(doc.id, doc.PK).read();
    assert.equal(read.statusCode, 200);
    assert.deepEqual(
      { ...read.resource, _rid: undefined, _self: undefined, _etag: undefined, _ts: undefined, _attachments: undefined },
      { ...doc, _rid: undefined, _self: undefined, _etag: undefined, _ts: undefined, _attachments: undefined },
    );
    // Without the keys, the same item is opaque: base64 strings in place of
    // every encrypted value, the plain ones as they were.
    const { resources } = await plain.database(database.id).container("people").items.query({
      query: "SELECT * FROM c WHERE c.nonsensitive = @n",
      parameters: [{ name: "@n", value: doc.nonsensitive }],
    }).fetchAll();
    assert.equal(resources.length, 1);
    const raw = resources[0];
    // Objects and arrays keep their shape; their leaves are encrypted.
    for (const v of [raw.id, raw.PK, raw.ssn, raw.salary, raw.address.city, raw.address.zip, ...raw.notes]) {
      assert.equal(typeof v, "string", `a value is stored as ${JSON.stringify(v)}: ${JSON.stringify(raw)}`);
    }
    assert.ok(!JSON.stringify(raw).includes(doc.ssn), "the plaintext reached the server");
    assert.equal(raw.nonsensitive, doc.nonsensitive);
  });

  test("deterministic values are queried by the SDK's encrypted parameters", async () => {
    const pk = randomUUID();
    const a = person(pk);
    const b = { ...person(pk), salary: 99.5 };
    await container.items.create(a);
    await container.items.create(b);
    const bySsn = new EncryptionQueryBuilder("SELECT * FROM c WHERE c.ssn = @ssn AND c.PK = @pk");
    bySsn.addParameter("@ssn", a.ssn, "/ssn");
    bySsn.addParameter("@pk", pk, "/PK");
    let { resources } = await (await container.items.getEncryptionQueryIterator(bySsn)).fetchAll();
    assert.deepEqual(resources.map((d) => d.id), [a.id]);
    assert.equal(resources[0].ssn, a.ssn);
    const bySalary = new EncryptionQueryBuilder("SELECT * FROM c WHERE c.salary = @s");
    bySalary.addParameter("@s", { value: 99.5, numberType: CosmosEncryptedNumberType.Float }, "/salary");
    ({ resources } = await (await container.items.getEncryptionQueryIterator(bySalary)).fetchAll());
    assert.deepEqual(resources.map((d) => d.id), [b.id]);
    const byObject = new EncryptionQueryBuilder("SELECT * FROM c WHERE c.address = @a AND c.PK = @pk");
    byObject.addParameter("@a", a.address, "/address");
    byObject.addParameter("@pk", pk, "/PK");
    ({ resources } = await (await container.items.getEncryptionQueryIterator(byObject)).fetchAll());
    assert.equal(resources.length, 2);
    const count = await container.items.query({ query: "SELECT VALUE COUNT(1) FROM c WHERE c.nonsensitive IN (@x, @y)", parameters: [{ name: "@x", value: a.nonsensitive }, { name: "@y", value: b.nonsensitive }] }).fetchAll();
    assert.deepEqual(count.resources, [2]);
  });

  test("replace, upsert, patch, delete, batch and bulk go through encrypted", async () => {
    const pk = randomUUID();
    const doc = person(pk);
    await container.items.create(doc);
    doc.ssn = "changed";
    const replaced = await container.item(doc.id, pk).replace(doc);
    assert.equal(replaced.resource.ssn, "changed");
    const upserted = await container.items.upsert({ ...doc, salary: 7.25 });
    assert.equal(upserted.statusCode, 200);
    assert.equal(upserted.resource.salary, 7.25);
    const patched = await container.item(doc.id, pk).patch([{ op: "replace", path: "/ssn", value: "patched" }]);
    assert.equal(patched.resource.ssn, "patched");
    assert.equal((await container.item(doc.id, pk).read()).resource.ssn, "patched");

    const one = person(pk);
    const two = person(pk);
    const batch = await container.items.batch(
      [
        { operationType: "Create", resourceBody: one },
        { operationType: "Upsert", resourceBody: two },
        { operationType: "Read", id: doc.id },
        { operationType: "Delete", id: doc.id },
      ],
      pk,
    );
    assert.equal(batch.code, 200);
    assert.equal(batch.result[0].resourceBody.ssn, one.ssn);
    assert.equal(batch.result[2].resourceBody.ssn, "patched");
    const gone = await container.item(doc.id, pk).read();
    assert.equal(gone.statusCode, 404);
    const conflict = await container.items.batch([{ operationType: "Create", resourceBody: one }], pk);
    assert.equal(conflict.result[0].statusCode, 409);

    const three = person();
    const bulk = await container.items.bulk([
      { operationType: "Create", resourceBody: three },
      { operationType: "Replace", id: one.id, partitionKey: pk, resourceBody: { ...one, ssn: "bulk" } },
      { operationType: "Delete", id: two.id, partitionKey: pk },
    ]);
    assert.deepEqual(bulk.map((r) => r.statusCode), [201, 200, 204]);
    assert.equal((await container.item(one.id, pk).read()).resource.ssn, "bulk");
    assert.equal((await container.item(three.id, three.PK).read()).resource.ssn, three.ssn);
  });

  test("a client whose container was deleted and made again with another policy recovers", async () => {
    const other = encryptingClient();
    const name = uniqueId("recreated");
    const policies = [
      { includedPaths: [encrypted("/ssn", "ceka")], policyFormatVersion: 2 },
      policy,
      { includedPaths: [encrypted("/salary", "cekb"), encrypted("/PK", "ceka")], policyFormatVersion: 2 },
    ];
    let generation = 0;
    async function recreate() {
      if (generation > 0) {
        await database.container(name).delete();
      }
      await database.containers.create({ id: name, partitionKey: { paths: ["/PK"] }, clientEncryptionPolicy: policies[generation++ % policies.length] });
    }
    await recreate();
    const stale = other.database(database.id).container(name);
    await stale.items.create(person("p"));
    // Each kind of request meets the container made again (400/1024): the
    // SDK reloads the policy and says so, and the next request is
    // encrypted with the new policy.
    const attempts = {
      create: () => stale.items.create(person("p")),
      query: () => stale.items.query("SELECT * FROM c").fetchAll(),
      batch: () => stale.items.batch([{ operationType: "Create", resourceBody: person("p") }], "p"),
      bulk: () => stale.items.bulk([{ operationType: "Create", resourceBody: person("p") }]),
    };
    for (const [kind, attempt] of Object.entries(attempts)) {
      await recreate();
      const err = await expectCosmosError(attempt);
      assert.match(err.message, /mismatch in Client Encryption Policy/, `${kind}: ${err.message}`);
      await attempt();
    }
    const last = person("p");
    await stale.items.create(last);
    const read = await database.container(name).item(last.id, last.PK).read();
    assert.equal(read.resource.salary, last.salary);
    const raw = await plain.database(database.id).container(name).items.query({
      query: "SELECT * FROM c WHERE c.nonsensitive = @n",
      parameters: [{ name: "@n", value: last.nonsensitive }],
    }).fetchAll();
    const encryptedPaths = policies[(generation - 1) % policies.length].includedPaths.map((p) => p.path.slice(1));
    for (const k of encryptedPaths) {
      assert.notEqual(raw.resources[0][k], last[k], `${k} was not encrypted with the new policy`);
    }
    other.dispose();
  });
});
