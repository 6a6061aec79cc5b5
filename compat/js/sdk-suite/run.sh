#!/bin/bash
# Runs the JavaScript SDK's own public test suite against one `orrery serve -memory`, in one mocha
# run, with the published @azure/cosmos package this directory pins (the version compat/js pins).
#
# usage: compat/js/sdk-suite/run.sh SDK_DIR [spec file globs, relative to SDK_DIR]
#   SDK_DIR  the SDK's source directory, sdk/cosmosdb/cosmos of an azure-sdk-for-js checkout
#            (its test tree is read, test/public run; nothing is copied into this repository)
#   default  every test/public/**/*.spec.ts
# env: OUT (results directory, default a new temporary one), PORT (default 8081, the emulator's and
#      orrery serve's, which the suite's sslVerification spec addresses itself),
#      CGW_PORT (the compute gateway's, default 8903, the emulator's),
#      MOCHA_TIMEOUT (per test, ms, default 100000, as the SDK's own integration-test script)
#
# First `npm ci --prefix compat/js/sdk-suite`. The spec files import the SDK's sources as
# ../src/...; here src is the published package's compiled tree (dist/commonjs), so the tests
# exercise the same build users install. Prints pass/fail/pending per spec file and the total;
# OUT/results.json is mocha's JSON report, OUT/server.log the server's log.
#
# The suite addresses the emulator's compute gateway as its endpoint with port 8081 replaced by
# 8903 (TestHelpers' defaultRoutingGatewayPort and defaultComputeGatewayPort): in the copy of the
# test tree these name PORT and CGW_PORT, where the server serves --compute-gateway-addr.
set -u
SDK=$(cd "${1:?usage: run.sh SDK_DIR [spec globs]}" && pwd) || exit 2
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PORT=${PORT:-8081}
CGW_PORT=${CGW_PORT:-8903}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -d "$SDK/test/public" ] || { echo "no test/public under $SDK" >&2; exit 2; }
[ -d "$HERE/node_modules/mocha" ] || { echo "run npm ci --prefix compat/js/sdk-suite first" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$SDK/test" "$WORK/test"   # some public specs import helpers from test/internal
helpers="$WORK/test/public/common/TestHelpers.ts"
if grep -q 'defaultComputeGatewayPort' "$helpers" 2>/dev/null; then
  sed -i -e "s/\(defaultRoutingGatewayPort[^=]*= *\)\":8081\"/\1\":$PORT\"/" \
    -e "s/\(defaultComputeGatewayPort[^=]*= *\)\":8903\"/\1\":$CGW_PORT\"/" "$helpers"
fi
ln -s "$HERE/node_modules" "$WORK/node_modules"
ln -s "$HERE/node_modules/@azure/cosmos/dist/commonjs" "$WORK/src"
cat > "$WORK/tsconfig.json" <<'EOF'
{ "compilerOptions": { "module": "commonjs", "target": "es2020", "esModuleInterop": true,
  "allowSyntheticDefaultImports": true, "strict": false, "skipLibCheck": true } }
EOF
echo '{ "private": true, "type": "commonjs" }' > "$WORK/package.json"

(cd "$ROOT" && go build -o "$WORK/orrery" ./cmd/orrery) || exit 1
"$WORK/orrery" serve -memory -addr "localhost:$PORT" -compute-gateway-addr "localhost:$CGW_PORT" -log-level error > "$OUT/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -sk "https://localhost:$PORT/" -o /dev/null && break; sleep 0.2; done

specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=("test/public/**/*.spec.ts")
(
  cd "$WORK" &&
    TS_NODE_TRANSPILE_ONLY=1 TS_NODE_PROJECT="$WORK/tsconfig.json" \
      ACCOUNT_HOST="https://localhost:$PORT" NODE_TLS_REJECT_UNAUTHORIZED=0 \
      NODE_OPTIONS=--dns-result-order=ipv4first \
      node node_modules/mocha/bin/mocha.js -r ts-node/register -r ./test/public/common/setup.ts \
      --timeout "${MOCHA_TIMEOUT:-100000}" --reporter json --reporter-option "output=$OUT/results.json" \
      "${specs[@]}" > "$OUT/mocha.log" 2>&1
)
echo "mocha exit $? (results in $OUT)"

node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const root = process.argv[2] + "/";
const per = new Map();
const row = (f) => { f = (f || "?").replace(root, ""); if (!per.has(f)) per.set(f, { pass: 0, fail: 0, pending: 0, failures: [] }); return per.get(f); };
for (const t of r.passes) row(t.file).pass++;
for (const t of r.pending) row(t.file).pending++;
for (const t of r.failures) { const p = row(t.file); p.fail++; p.failures.push(t.fullTitle + " :: " + String((t.err && t.err.message) || "").split("\n")[0].slice(0, 160)); }
let P = 0, F = 0, S = 0;
for (const [f, p] of [...per].sort()) {
  console.log(`${f}: pass ${p.pass} fail ${p.fail} pending ${p.pending}`);
  for (const x of p.failures) console.log("  FAIL " + x);
  P += p.pass; F += p.fail; S += p.pending;
}
console.log(`TOTAL pass ${P} fail ${F} pending ${S}`);
' "$OUT/results.json" "$WORK" | tee "$OUT/summary.txt"
