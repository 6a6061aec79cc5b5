// Unit test of the query metrics parser the explorer shows the
// x-ms-documentdb-query-metrics header with, in the service's format,
// which Orrery sends too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseQueryMetrics } from '../assets/metrics.js';

test('the service\'s query metrics header is parsed in order, with labels and units', () => {
  const header = 'totalExecutionTimeInMs=0.62;queryCompileTimeInMs=0.05;queryLogicalPlanBuildTimeInMs=0.02;' +
    'queryPhysicalPlanBuildTimeInMs=0.03;queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs=0.12;' +
    'indexLookupTimeInMs=0.01;documentLoadTimeInMs=0.04;systemFunctionExecuteTimeInMs=0.00;' +
    'userFunctionExecuteTimeInMs=0.00;retrievedDocumentCount=6;retrievedDocumentSize=1284;' +
    'outputDocumentCount=6;outputDocumentSize=402;writeOutputTimeInMs=0.00;indexUtilizationRatio=1.00';
  const m = parseQueryMetrics(header);
  assert.equal(m.length, 16);
  assert.deepEqual(m[0], { name: 'totalExecutionTimeInMs', label: 'Total execution time', value: 0.62, unit: 'ms' });
  assert.deepEqual(m.find((x) => x.name === 'retrievedDocumentCount'), { name: 'retrievedDocumentCount', label: 'Retrieved documents', value: 6, unit: '' });
  assert.deepEqual(m.find((x) => x.name === 'outputDocumentSize'), { name: 'outputDocumentSize', label: 'Output document size', value: 402, unit: 'bytes' });
});

test('absent, empty and malformed parts give nothing; unknown names are kept as they are', () => {
  assert.deepEqual(parseQueryMetrics(null), []);
  assert.deepEqual(parseQueryMetrics(''), []);
  assert.deepEqual(parseQueryMetrics(';;=3;noequals;'), []);
  assert.deepEqual(parseQueryMetrics('futureMetric=abc; spacedName = 2 '), [
    { name: 'futureMetric', label: 'futureMetric', value: 'abc', unit: '' },
    { name: 'spacedName', label: 'spacedName', value: 2, unit: '' },
  ]);
});
