// A small client of the Cosmos DB REST API as the server speaks it. Every
// request is signed here, in the browser, exactly as the SDKs sign theirs:
// HMAC-SHA256 (WebCrypto) of "verb\nresourceType\nresourceLink\ndate\n\n"
// with the base64 master or read-only key, or a resource token sent as is.
// The credential lives in this object only.

const API_VERSION = '2020-07-15';

/** An error answer of the REST API, or a failure to reach it. */
export class CosmosError extends Error {
  constructor(status, code, message, headers) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
    this.substatus = Number(headers?.get('x-ms-substatus') || 0);
  }
  /** A one-line description for people: status, code and the message's first line. */
  describe() {
    const first = String(this.message || '').split(/\r?\n/)[0];
    return `${this.status} ${this.code}${first ? ': ' + first : ''}`;
  }
}

function base64ToBytes(b64) {
  const bin = atob(b64.trim());
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToBase64(buf) {
  let s = '';
  for (const b of new Uint8Array(buf)) s += String.fromCharCode(b);
  return btoa(s);
}

/**
 * signingScope returns the resource type and link a request is signed over,
 * from its path segments (ids unencoded), like the server derives them.
 */
export function signingScope(segs) {
  if (segs.length === 0) return ['', ''];
  // An offer is addressed by its RID, which is signed lower-cased.
  if (segs[0] === 'offers') return ['offers', segs.length > 1 ? segs[1].toLowerCase() : ''];
  if (segs.length % 2 === 1) return [segs[segs.length - 1], segs.slice(0, -1).join('/')];
  return [segs[segs.length - 2], segs.join('/')];
}

/** Client sends signed requests with one credential. */
export class Client {
  /**
   * @param {{kind: 'master'|'readonly'|'token', secret: string}} cred
   */
  constructor(cred) {
    this.kind = cred.kind;
    this.secret = cred.secret.trim();
    this.keyPromise = null;
    if (this.kind !== 'token') {
      if (!globalThis.crypto?.subtle) {
        throw new Error('This page is not in a secure context, so the browser offers no WebCrypto to sign requests: open it over HTTPS or on localhost.');
      }
      let raw;
      try {
        raw = base64ToBytes(this.secret);
      } catch {
        throw new Error('The key is not valid base64: copy it exactly as the server prints or the account shows it.');
      }
      if (raw.length === 0) throw new Error('The key is empty.');
      this.keyPromise = crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    } else if (!/^type=resource&/.test(decodeURIComponent(this.secret))) {
      throw new Error('A resource token starts with "type=resource&": copy the permission\'s _token whole.');
    }
  }

  async authorization(verb, segs, date) {
    if (this.kind === 'token') {
      return this.secret.includes('%') ? this.secret : encodeURIComponent(this.secret);
    }
    const [type, link] = signingScope(segs);
    const payload = `${verb.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${date.toLowerCase()}\n\n`;
    const sig = await crypto.subtle.sign('HMAC', await this.keyPromise, new TextEncoder().encode(payload));
    return encodeURIComponent(`type=master&ver=1.0&sig=${bytesToBase64(sig)}`);
  }

  /**
   * request sends one signed request. segs are the path's segments, ids
   * unencoded. It resolves with the status, parsed body, headers, charge,
   * ETag and continuation, or rejects with a CosmosError (304 resolves).
   * signAs, when given, are the segments the request is signed over, for
   * paths outside the REST API's scheme (the server's /_admin/ calls).
   */
  async request(method, segs, { headers = {}, body, signAs } = {}) {
    const date = new Date().toUTCString();
    const h = new Headers(headers);
    h.set('x-ms-date', date);
    h.set('x-ms-version', API_VERSION);
    h.set('Authorization', await this.authorization(method, signAs || segs, date));
    if (!h.has('Accept')) h.set('Accept', 'application/json');
    let payload = body;
    if (body !== undefined && typeof body !== 'string') payload = JSON.stringify(body);
    if (payload !== undefined && !h.has('Content-Type')) h.set('Content-Type', 'application/json');
    const url = '/' + segs.map(encodeURIComponent).join('/');
    let res;
    try {
      res = await fetch(url, { method, headers: h, body: payload, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new CosmosError(0, 'NetworkError', `The server could not be reached: ${e.message}`, new Headers());
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (!res.ok && res.status !== 304) {
      const code = (data && data.code) || res.statusText || 'Error';
      const message = (data && data.message) || (typeof data === 'string' ? data : '');
      throw new CosmosError(res.status, code, message, res.headers);
    }
    return {
      status: res.status,
      body: data,
      headers: res.headers,
      charge: Number(res.headers.get('x-ms-request-charge') || 0),
      etag: res.headers.get('etag'),
      continuation: res.headers.get('x-ms-continuation'),
    };
  }
}

/**
 * faults calls the server's fault rules API (/_admin/faults, or
 * /_admin/faults/{id} when id is given), signed as resource type "faults"
 * with the link "" or "faults/{id}", which the master key alone may call.
 */
export function faults(client, method, id, body) {
  const segs = id ? ['faults', id] : ['faults'];
  return client.request(method, ['_admin', ...segs], { body, signAs: segs });
}

/** partitionKeyHeader encodes partition key values for x-ms-documentdb-partitionkey. */
export function partitionKeyHeader(values) {
  return JSON.stringify(values.map((v) => (v === undefined ? {} : v)));
}

/** partitionKeyValues reads the values of a container's partition key paths from an item. */
export function partitionKeyValues(pkDef, item) {
  const paths = pkDef?.paths || [];
  return paths.map((p) => {
    let v = item;
    for (const part of p.split('/').slice(1)) {
      if (v === null || typeof v !== 'object') return undefined;
      v = v[part.replace(/^"(.*)"$/, '$1')];
    }
    return v;
  });
}
