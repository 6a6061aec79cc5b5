#!/bin/sh
# bench/compare.sh: compare the server's CPU per request between two commits,
# in one run, and fail when a request kind's CPU per operation grew by more
# than 10%.
#
#   bench/compare.sh [OLD [NEW]]
#
# OLD defaults to HEAD~1 (the previous commit), NEW to the working tree
# (uncommitted changes included); either may be any commit, tag or branch.
# Both servers are built, then cmd/orrery's BenchmarkServer (built once,
# from the working tree) measures them COUNT times, alternating which goes
# first, and the medians are compared per request kind and store.
#
# Environment: COUNT (rounds, default 5), BENCHTIME (per kind and round,
# default 3s), STORES (default pebble,memory; postgres too when PostgreSQL
# is installed), KINDS (default all: upsert,read,replace,patch,query),
# THRESHOLD (percent, default 10), KEEP (a directory to keep the raw
# results in). With benchstat on PATH its report is printed too.
#
# CPU per operation is a measurement, not a test: on a shared or loaded
# machine one build's rounds spread by ±20-40% and more, and a commit
# compared with itself (COUNT=5 BENCHTIME=2s, load average 12-16) failed
# the 10% gate on 5 of 10 kinds, medians -36% to +36% apart. Trust a
# difference only on a quiet machine, with more rounds, when the rounds'
# ranges do not overlap. The guard CI keeps is bench/budget.txt, exact
# counts per request held by instance's *CountedBudget tests.
set -eu

old=${1:-HEAD~1}
new=${2:-}
count=${COUNT:-5}
benchtime=${BENCHTIME:-3s}
threshold=${THRESHOLD:-10}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build() { # build REV OUT: the server of REV (the working tree when REV is empty)
	if [ -z "$1" ]; then
		(cd "$root" && go build -o "$2" ./cmd/orrery)
	else
		src="$tmp/src-$(basename "$2")"
		mkdir -p "$src"
		git -C "$root" archive "$(git -C "$root" rev-parse --verify "$1^{commit}")" | tar -x -C "$src"
		(cd "$src" && go build -o "$2" ./cmd/orrery)
	fi
}

echo "building old (${old}) and new (${new:-working tree}) servers and the benchmark" >&2
build "$old" "$tmp/orrery-old"
build "$new" "$tmp/orrery-new"
(cd "$root" && go test -c -o "$tmp/bench.test" ./cmd/orrery)

run() { # run WHICH
	ORRERY_BENCH_BIN="$tmp/orrery-$1" ORRERY_BENCH_STORES="${STORES:-pebble,memory}" \
		ORRERY_BENCH_KINDS="${KINDS:-}" \
		"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkServer$' -test.benchtime "$benchtime" \
		>"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; echo "compare.sh: the benchmark failed on $1" >&2; exit 2; }
	grep '^BenchmarkServer' "$tmp/out" >>"$tmp/$1.txt" || true
}

i=1
while [ "$i" -le "$count" ]; do
	echo "round $i of $count" >&2
	if [ $((i % 2)) -eq 1 ]; then run old; run new; else run new; run old; fi
	i=$((i + 1))
done

if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP" && cp "$tmp/old.txt" "$tmp/new.txt" "$KEEP/"
fi
if command -v benchstat >/dev/null 2>&1; then
	benchstat "$tmp/old.txt" "$tmp/new.txt" || true
fi

# Medians of cpu-µs/op and ops/s per benchmark, old against new.
awk -v threshold="$threshold" '
function metric(line, unit,   n, f, i) {
	n = split(line, f, /[ \t]+/)
	for (i = 3; i < n; i++) if (f[i + 1] == unit) return f[i]
	return ""
}
function median(list,   n, v, i, j, t) {
	n = split(list, v, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkServer\//, "", name)
	which = FILENAME ~ /old\.txt$/ ? "old" : "new"
	if (!(name in seen)) { seen[name] = 1; order[++names] = name }
	cpu[which, name] = cpu[which, name] " " metric($0, "cpu-µs/op")
	ops[which, name] = ops[which, name] " " metric($0, "ops/s")
}
END {
	printf "%-28s %14s %14s %8s %12s %12s\n", "server/kind", "old cpu-µs/op", "new cpu-µs/op", "delta", "old ops/s", "new ops/s"
	bad = 0
	for (k = 1; k <= names; k++) {
		name = order[k]
		if (cpu["old", name] == "" || cpu["new", name] == "") continue
		o = median(cpu["old", name]); n = median(cpu["new", name])
		d = o > 0 ? (n - o) * 100 / o : 0
		flag = ""
		if (d > threshold) { flag = "  <-- CPU/op grew more than " threshold "%"; bad++ }
		printf "%-28s %14.1f %14.1f %+7.1f%% %12.0f %12.0f%s\n", name, o, n, d, median(ops["old", name]), median(ops["new", name]), flag
	}
	if (bad) {
		printf "\nFAIL: %d request kind(s) cost more than %d%% more server CPU per operation\n", bad, threshold > "/dev/stderr"
		exit 1
	}
	print "\nok: no request kind costs more than " threshold "% more server CPU per operation"
}' "$tmp/old.txt" "$tmp/new.txt"
