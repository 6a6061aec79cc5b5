#!/usr/bin/env bash
# Times the diskANN index and hnswlib on the same data set in alternation,
# ROUNDS times (3 by default), for a ratio that holds on a busy machine:
# compare the best of each setting's rounds at equal recall. Run from the
# repository's root after one full run of the benchmarks and of compare.py
# (which build and keep the indexes).
set -euo pipefail
rounds=${ROUNDS:-3}
for i in $(seq 1 "$rounds"); do
  echo "== round $i: Orrery diskANN"
  go test -run XXX -bench 'BenchmarkDiskANN$' -benchtime 2000x -timeout 1h ./engine/internal/vector/ | grep '^Benchmark'
  echo "== round $i: hnswlib"
  /usr/bin/python3 engine/internal/vector/bench/compare.py --hnswlib-only --rounds 2 | grep ef=
done
