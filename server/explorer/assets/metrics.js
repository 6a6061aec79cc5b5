// Query metrics: the x-ms-documentdb-query-metrics header, a list of
// "name=value" pairs separated by semicolons, made readable.

const LABELS = {
  totalExecutionTimeInMs: ['Total execution time', 'ms'],
  queryCompileTimeInMs: ['Query compile time', 'ms'],
  queryLogicalPlanBuildTimeInMs: ['Logical plan build time', 'ms'],
  queryPhysicalPlanBuildTimeInMs: ['Physical plan build time', 'ms'],
  queryOptimizationTimeInMs: ['Query optimization time', 'ms'],
  indexLookupTimeInMs: ['Index lookup time', 'ms'],
  documentLoadTimeInMs: ['Document load time', 'ms'],
  systemFunctionExecuteTimeInMs: ['System function execution time', 'ms'],
  userFunctionExecuteTimeInMs: ['User function execution time', 'ms'],
  VMExecutionTimeInMs: ['Runtime execution time', 'ms'],
  documentWriteTimeInMs: ['Document write time', 'ms'],
  retrievedDocumentCount: ['Retrieved documents', ''],
  retrievedDocumentSize: ['Retrieved document size', 'bytes'],
  outputDocumentCount: ['Output documents', ''],
  outputDocumentSize: ['Output document size', 'bytes'],
  writeOutputTimeInMs: ['Write output time', 'ms'],
  indexUtilizationRatio: ['Index utilization', ''],
};

/**
 * parseQueryMetrics parses the header into [{name, label, value, unit}], in
 * the header's order; an empty or absent header gives [].
 */
export function parseQueryMetrics(header) {
  if (!header) return [];
  const out = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    const raw = part.slice(eq + 1).trim();
    if (!name) continue;
    const [label, unit] = LABELS[name] || [name, ''];
    const num = Number(raw);
    out.push({ name, label, value: raw !== '' && Number.isFinite(num) ? num : raw, unit });
  }
  return out;
}
