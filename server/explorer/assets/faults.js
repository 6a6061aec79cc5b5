// Fault rules (the server's /_admin/faults): their kinds, how a rule reads
// in words, and a rule built from the page's form. No DOM here, so that the
// unit tests run it under node.

/** The kinds of fault the server injects, with what each does. */
export const FAULT_TYPES = [
  ['TooManyRequests', '429 Too Many Requests (3200), with a retry-after'],
  ['Timeout', '408 Request Timeout, nothing applied'],
  ['ServiceUnavailable', '503 Service Unavailable, nothing applied'],
  ['InternalServerError', '500 Internal Server Error, nothing applied'],
  ['RetryWith', '449 Retry With, nothing applied'],
  ['PartitionIsGone', 'A real split of the partition key range (410/1002 where the SDK must refresh)'],
  ['PartitionIsSplitting', '410 Gone (1007), completing split'],
  ['PartitionIsMigrating', '410 Gone (1008), completing migration'],
  ['ReadSessionNotAvailable', '404 (1002), read session not available'],
  ['ResponseDelay', 'Served as usual after a delay'],
  ['ConnectionReset', 'Connection reset before the request is read'],
  ['AppliedThenLost', 'Applied, then the reply is lost'],
  ['LostBeforeApply', 'Reply lost, nothing applied'],
];

/** How a reply is lost, for AppliedThenLost and LostBeforeApply. */
export const LOST_KINDS = [
  ['reset', 'The connection is reset'],
  ['Timeout', '408 Request Timeout instead of the reply'],
  ['ServiceUnavailable', '503 Service Unavailable instead of the reply'],
];

const LOSES = new Set(['AppliedThenLost', 'LostBeforeApply']);

/** losesReply reports whether a kind of fault loses the reply (and takes a "lost as"). */
export const losesReply = (type) => LOSES.has(type);

/** durationMs reads the server's duration strings ("250ms", "1.5s", "2m0s") as milliseconds. */
export function durationMs(d) {
  if (typeof d === 'number') return d;
  if (!d) return 0;
  let ms = 0;
  const units = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, 'µs': 0.001, us: 0.001, ns: 0.000001 };
  for (const [, n, u] of String(d).matchAll(/([0-9.]+)(ms|µs|us|ns|h|m|s)/g)) ms += Number(n) * units[u];
  return ms;
}

function formatMs(ms) {
  return ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000} s` : `${Number(ms.toFixed(3))} ms`;
}

/** describeResult says what a rule does to a request it fires for. */
export function describeResult(rule) {
  const r = rule.result || {};
  let s = r.type;
  if (losesReply(r.type)) s += `, lost as ${r.lost === 'reset' || !r.lost ? 'a reset connection' : r.lost === 'Timeout' ? '408' : '503'}`;
  if (durationMs(r.retryAfter)) s += `, retry after ${formatMs(durationMs(r.retryAfter))}`;
  if (durationMs(r.delay)) s += `, after ${formatMs(durationMs(r.delay))}`;
  return s;
}

/** describeCondition says which requests a rule applies to. */
export function describeCondition(rule) {
  const c = rule.condition || {};
  const on = [];
  if (c.operations?.length) on.push(c.operations.join(', '));
  if (c.database) on.push(`database ${c.database}`);
  if (c.container) on.push(`container ${c.container}`);
  if (c.partitionKey !== undefined) on.push(`partition key ${JSON.stringify(c.partitionKey)}`);
  if (c.partitionKeyRangeId) on.push(`range ${c.partitionKeyRangeId}`);
  if (c.clientIp) on.push(`client ${c.clientIp}`);
  if (c.userAgent) on.push(`user agent contains “${c.userAgent}”`);
  if (c.user) on.push(`user ${c.user}`);
  return on.length ? on.join('; ') : 'Every request';
}

/** describeLimits says how often and when a rule fires. */
export function describeLimits(rule) {
  const out = [];
  if (rule.times) out.push(`${rule.times} times at most`);
  if (rule.probability) out.push(`${Number((rule.probability * 100).toFixed(2))}% of matching requests`);
  if (rule.start) out.push(`from ${new Date(rule.start).toISOString()}`);
  if (rule.end) out.push(`until ${new Date(rule.end).toISOString()}`);
  return out.length ? out.join('; ') : 'Every matching request';
}

/**
 * ruleFromForm builds a rule for POST /_admin/faults from the form's text
 * fields, or throws an Error saying which field is wrong. Empty fields are
 * left out; the server checks the rest.
 */
export function ruleFromForm(f) {
  const rule = { condition: {}, result: { type: f.type } };
  if (!FAULT_TYPES.some(([t]) => t === f.type)) throw new Error('Choose what the rule does.');
  const id = (f.id || '').trim();
  if (id) {
    if (/[/\\?#]/.test(id)) throw new Error('A rule id may not contain / \\ ? or #.');
    rule.id = id;
  }
  if (losesReply(f.type)) rule.result.lost = f.lost || 'reset';
  const num = (text, what, { min = 0, max = Infinity, integer = false } = {}) => {
    const s = String(text ?? '').trim();
    if (!s) return undefined;
    const n = Number(s);
    if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
      throw new Error(`${what} must be ${integer ? 'a whole number' : 'a number'} from ${min}${max === Infinity ? ' up' : ' to ' + max}.`);
    }
    return n;
  };
  if (f.type === 'TooManyRequests') {
    const ra = num(f.retryAfterMs, 'Retry after (ms)', { min: 1 });
    if (ra !== undefined) rule.result.retryAfter = `${ra}ms`;
  }
  const delay = num(f.delayMs, 'Delay (ms)', { min: 1 });
  if (delay !== undefined) rule.result.delay = `${delay}ms`;
  if (f.type === 'ResponseDelay' && delay === undefined) throw new Error('A response delay needs a delay.');
  const ops = String(f.operations || '').split(',').map((s) => s.trim()).filter(Boolean);
  if (ops.length) rule.condition.operations = ops;
  for (const k of ['database', 'container', 'userAgent']) {
    const v = String(f[k] || '').trim();
    if (v) rule.condition[k] = v;
  }
  const times = num(f.times, 'Times', { min: 1, integer: true });
  if (times !== undefined) rule.times = times;
  const pct = num(f.percent, 'Share of requests (%)', { min: 0.01, max: 100 });
  if (pct !== undefined && pct < 100) rule.probability = pct / 100;
  return rule;
}
