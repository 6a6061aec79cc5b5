// Unit tests of how the explorer's fault rules page reads a rule in words
// and builds one from its form (assets/faults.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeCondition, describeLimits, describeResult, durationMs, ruleFromForm } from '../assets/faults.js';

test('a rule as the server lists it reads in words', () => {
  const rule = {
    id: 'buyers-lost', hits: 3, times: 5, probability: 0.25,
    condition: { operations: ['CreateItem', 'BatchItem'], container: 'tickets', userAgent: 'cosmicticks-buyer' },
    result: { type: 'AppliedThenLost', lost: 'ServiceUnavailable' },
  };
  assert.equal(describeResult(rule), 'AppliedThenLost, lost as 503');
  assert.equal(describeCondition(rule), 'CreateItem, BatchItem; container tickets; user agent contains “cosmicticks-buyer”');
  assert.equal(describeLimits(rule), '5 times at most; 25% of matching requests');
  assert.equal(describeResult({ result: { type: 'TooManyRequests', retryAfter: '100ms' } }), 'TooManyRequests, retry after 100 ms');
  assert.equal(describeResult({ result: { type: 'ResponseDelay', delay: '2s' } }), 'ResponseDelay, after 2 s');
  assert.equal(describeCondition({ condition: {} }), 'Every request');
  assert.equal(describeLimits({}), 'Every matching request');
});

test('the server\'s durations are read as milliseconds', () => {
  assert.equal(durationMs('250ms'), 250);
  assert.equal(durationMs('1.5s'), 1500);
  assert.equal(durationMs('2m0s'), 120000);
  assert.equal(durationMs('1m30.5s'), 90500);
  assert.equal(durationMs(undefined), 0);
});

test('the form builds the rule the admin API takes, leaving empty fields out', () => {
  assert.deepEqual(ruleFromForm({ type: 'TooManyRequests', retryAfterMs: '20', operations: 'ReadItem, QueryItem', times: '3', percent: '' }), {
    condition: { operations: ['ReadItem', 'QueryItem'] }, result: { type: 'TooManyRequests', retryAfter: '20ms' }, times: 3,
  });
  assert.deepEqual(ruleFromForm({ id: ' lost ', type: 'AppliedThenLost', lost: 'Timeout', container: 'orders', userAgent: 'azsdk-js', percent: '25' }), {
    id: 'lost', condition: { container: 'orders', userAgent: 'azsdk-js' }, result: { type: 'AppliedThenLost', lost: 'Timeout' }, probability: 0.25,
  });
  // 100% is every request: no probability.
  assert.deepEqual(ruleFromForm({ type: 'Timeout', percent: '100' }), { condition: {}, result: { type: 'Timeout' } });
});

test('a wrong field is refused saying which', () => {
  assert.throws(() => ruleFromForm({ type: 'Nope' }), /Choose what the rule does/);
  assert.throws(() => ruleFromForm({ type: 'Timeout', percent: '150' }), /Share of requests \(%\) must be a number from 0.01 to 100/);
  assert.throws(() => ruleFromForm({ type: 'Timeout', times: '1.5' }), /Times must be a whole number/);
  assert.throws(() => ruleFromForm({ type: 'ResponseDelay' }), /needs a delay/);
  assert.throws(() => ruleFromForm({ id: 'a/b', type: 'Timeout' }), /may not contain/);
});
