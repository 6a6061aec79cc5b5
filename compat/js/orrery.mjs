// Shared set-up for the JavaScript SDK compatibility tests: a CosmosClient
// built exactly as an application would build one, pointed at the server
// named by ORRERY_ENDPOINT and signed with ORRERY_KEY.
import { createHmac, randomUUID } from "node:crypto";
import { CosmosClient } from "@azure/cosmos";

/** Returns the value of a required environment variable or throws. */
function requireEnv(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests through \`go test ./compat\``);
  }
  return value;
}

/** Returns a new, unmodified CosmosClient for the server under test. */
export function newClient() {
  return new CosmosClient({
    endpoint: requireEnv("ORRERY_ENDPOINT"),
    key: requireEnv("ORRERY_KEY"),
  });
}

/**
 * Returns a CosmosClient for the server under test that authenticates with
 * auth instead of the master key: { resourceTokens } or { permissionFeed }.
 */
export function newClientWith(auth) {
  return new CosmosClient({ endpoint: requireEnv("ORRERY_ENDPOINT"), ...auth });
}

/** Returns an id that no other test uses, starting with prefix. */
export function uniqueId(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * Runs fn, which must reject with a Cosmos error, and returns that error.
 * Fails when fn resolves.
 */
export async function expectCosmosError(fn) {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected the operation to fail with a Cosmos DB error, but it succeeded");
}

/** Matches the quoted etag format of the service: "\"...\"". */
export const quotedEtag = /^".+"$/;

/**
 * Splits partition key range rangeId of container coll in database db through
 * Orrery's administrative call (POST /_admin/dbs/{db}/colls/{coll}/pkranges/
 * {id}/split, signed with the master key as a POST on the range) and returns
 * the two children as the pkranges feed shows them.
 */
export async function splitRange(db, coll, rangeId) {
  const link = `dbs/${db}/colls/${coll}/pkranges/${rangeId}`;
  const date = new Date().toUTCString();
  const payload = `post\npkranges\n${link}\n${date.toLowerCase()}\n\n`;
  const key = Buffer.from(requireEnv("ORRERY_KEY"), "base64");
  const sig = createHmac("sha256", key).update(payload).digest("base64");
  const endpoint = requireEnv("ORRERY_ENDPOINT").replace(/\/$/, "");
  const res = await fetch(`${endpoint}/_admin/${link}/split`, {
    method: "POST",
    headers: { "x-ms-date": date, authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`) },
  });
  const body = await res.json();
  if (res.status !== 200) {
    throw new Error(`splitting range ${rangeId}: ${res.status} ${JSON.stringify(body)}`);
  }
  return body.PartitionKeyRanges;
}

/**
 * Sends an administrative call on Orrery's fault rules (/_admin/faults,
 * signed with the master key as resource type "faults" and link "" or
 * "faults/{id}") and returns the parsed answer.
 */
export async function faultsAdmin(method, id, body) {
  const link = id ? `faults/${id}` : "";
  const date = new Date().toUTCString();
  const payload = `${method.toLowerCase()}\nfaults\n${link}\n${date.toLowerCase()}\n\n`;
  const key = Buffer.from(requireEnv("ORRERY_KEY"), "base64");
  const sig = createHmac("sha256", key).update(payload).digest("base64");
  const endpoint = requireEnv("ORRERY_ENDPOINT").replace(/\/$/, "");
  const res = await fetch(`${endpoint}/_admin/faults${id ? `/${id}` : ""}`, {
    method,
    headers: {
      "x-ms-date": date,
      authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`),
      "content-type": "application/json",
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) {
    throw new Error(`${method} /_admin/faults/${id ?? ""}: ${res.status} ${text}`);
  }
  return text ? JSON.parse(text) : null;
}
