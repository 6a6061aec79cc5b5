#!/usr/bin/env python3
"""Measures hnswlib and FAISS on the data set the Go benchmarks generate.

Run the Go benchmarks first (they write the data set), then:

    /usr/bin/python3 engine/internal/vector/bench/compare.py [--hnswlib-only] [--rounds N] [DIR]

DIR is the data set's folder: $ORRERY_VECTOR_BENCH_DIR/n100000-latent48-noise2
(the temporary directory's orrery-vector-bench/ by default). It uses the
Debian packages python3-hnswlib, python3-faiss and python3-numpy, on one
thread, and prints recall@10 against the exact neighbours the Go benchmark
computed, queries per second (one core) and build time. The hnswlib
indexes are saved beside the data set and loaded by later runs (with the
build time first measured), so that query timings can be taken again,
alternating with the Go benchmarks' on a busy machine; with --rounds N each
setting is timed N times and the best is reported.
"""
import glob
import os
import sys
import tempfile
import time

import numpy as np


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=np.int32)
    dim = raw[0]
    rows = raw.reshape(-1, dim + 1)[:, 1:]
    return rows.view(dtype) if dtype == np.float32 else rows


def recall(found, gt, k=10):
    hit = 0
    for f, g in zip(found, gt):
        hit += len(set(int(x) for x in f[:k]) & set(int(x) for x in g[:k]))
    return hit / (k * len(gt))


ROUNDS = 1


def timed_queries(fn, queries):
    """Runs the whole query set through fn in one call (the library's own
    loop, on one thread: no Python per query) ROUNDS times; returns the
    answers and the best queries/s."""
    best = 0.0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        out = fn(queries)
        best = max(best, len(queries) / (time.perf_counter() - start))
    return out, best


def main():
    global ROUNDS
    args = sys.argv[1:]
    hnswlib_only = "--hnswlib-only" in args
    args = [a for a in args if a != "--hnswlib-only"]
    if "--rounds" in args:
        i = args.index("--rounds")
        ROUNDS = int(args[i + 1])
        del args[i:i + 2]
    if args:
        folder = args[0]
    else:
        base_dir = os.environ.get("ORRERY_VECTOR_BENCH_DIR",
                                  os.path.join(tempfile.gettempdir(), "orrery-vector-bench"))
        found = sorted(glob.glob(os.path.join(base_dir, "n*")))
        if not found:
            sys.exit("no data set: run the Go benchmarks first")
        folder = found[-1]
    base = np.ascontiguousarray(read_vecs(os.path.join(folder, "base.fvecs"), np.float32))
    queries = np.ascontiguousarray(read_vecs(os.path.join(folder, "query.fvecs"), np.float32))
    gt = read_vecs(os.path.join(folder, "gt.ivecs"), np.int32)
    gt_filter = read_vecs(os.path.join(folder, "gt_filter.ivecs"), np.int32)
    n, dim = base.shape
    print(f"data set {folder}: {n} x {dim}, {len(queries)} queries")

    import hnswlib
    for M in (16, 32):
        index = hnswlib.Index(space="ip", dim=dim)
        saved = os.path.join(folder, f"hnswlib-M{M}.bin")
        if os.path.exists(saved) and os.path.exists(saved + ".build"):
            index.load_index(saved, max_elements=n)
            build = float(open(saved + ".build").read())
        else:
            index.init_index(max_elements=n, ef_construction=200, M=M)
            index.set_num_threads(1)
            start = time.perf_counter()
            index.add_items(base, np.arange(n))
            build = time.perf_counter() - start
            index.save_index(saved)
            open(saved + ".build", "w").write(str(build))
        index.set_num_threads(1)
        print(f"hnswlib M={M} ef_construction=200: build {build:.1f} s ({n / build:.0f} vectors/s)")
        for ef in (10, 20, 40, 60, 100, 200):
            index.set_ef(max(ef, 10))
            res, qps = timed_queries(lambda qs: index.knn_query(qs, k=10, num_threads=1)[0], queries)
            print(f"  hnswlib M={M} ef={ef}: recall@10 {recall(res, gt):.4f}, {qps:.0f} queries/s")

    if hnswlib_only:
        return
    import faiss
    faiss.omp_set_num_threads(1)
    flat = faiss.IndexFlatIP(dim)
    flat.add(base)
    res, qps = timed_queries(lambda qs: flat.search(qs, 10)[1], queries[:200])
    print(f"faiss IndexFlatIP (exact): {qps:.1f} queries/s")
    hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 200
    start = time.perf_counter()
    hnsw.add(base)
    build = time.perf_counter() - start
    print(f"faiss IndexHNSWFlat M=32 efConstruction=200: build {build:.1f} s")
    for ef in (10, 20, 40, 60, 100, 200):
        hnsw.hnsw.efSearch = ef
        res, qps = timed_queries(lambda qs: hnsw.search(qs, 10)[1], queries)
        print(f"  faiss HNSW ef={ef}: recall@10 {recall(res, gt):.4f}, {qps:.0f} queries/s")
    try:
        ids = np.arange(3, n, 10).astype(np.int64)
        sel = faiss.IDSelectorBatch(len(ids), faiss.swig_ptr(ids))
        for ef in (40, 100, 400):
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=ef)
            res, qps = timed_queries(lambda qs: hnsw.search(qs, 10, params=params)[1], queries)
            print(f"  faiss HNSW filtered (1 in 10) ef={ef}: recall@10 {recall(res, gt_filter):.4f}, {qps:.0f} queries/s")
    except Exception as e:  # older FAISS without search parameters
        print(f"  faiss HNSW filtered: not available ({e})")


if __name__ == "__main__":
    main()
