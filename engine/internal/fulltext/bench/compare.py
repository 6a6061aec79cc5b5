#!/usr/bin/env python3
"""Ranks the full-text benchmark's queries with SQLite FTS5's bm25 and
reports how far its top 10s agree with the index's.

Run `go test -run XXX -bench FullText ./engine/internal/fulltext/` first (it
writes the files), then:

    python3 engine/internal/fulltext/bench/compare.py [DIR]

DIR defaults to $ORRERY_FULLTEXT_BENCH_DIR or the temporary directory's
orrery-fulltext-bench/. FTS5 indexes the same analyzed terms (each mapped to
a plain token, so both tokenize alike); its bm25 has the same k1 = 1.2 and
b = 0.75, with IDF log((N - n + 0.5) / (n + 0.5)) where Orrery's (Lucene's)
is log(1 + (N - n + 0.5) / (n + 0.5)). Agreement is the share of each top 10
found in the other's, averaged over the queries, counting as agreeing a
document tied (within 1e-9 relative) with the last of the other's top 10.
"""
import os
import sqlite3
import sys
import tempfile
import time


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "ORRERY_FULLTEXT_BENCH_DIR", os.path.join(tempfile.gettempdir(), "orrery-fulltext-bench"))
    docs = open(os.path.join(folder, "corpus.txt")).read().split("\n")[:-1]
    queries = [q.split() for q in open(os.path.join(folder, "queries.txt")).read().split("\n")[:-1]]
    results = []
    for line in open(os.path.join(folder, "results.txt")).read().split("\n")[:-1]:
        results.append([(k, float(s)) for k, s in (x.split(":") for x in line.split())] if line else [])
    tokens = {}

    def tok(term):
        if term not in tokens:
            tokens[term] = "t%d" % len(tokens)
        return tokens[term]

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='ascii')")
    start = time.perf_counter()
    db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)",
                   ((i, " ".join(tok(t) for t in d.split())) for i, d in enumerate(docs)))
    db.commit()
    build = time.perf_counter() - start
    agree, single, single_n = 0.0, 0.0, 0
    start = time.perf_counter()
    for q, ours in zip(queries, results):
        match = " OR ".join(tok(t) for t in q if t in tokens)
        rows = db.execute("SELECT rowid, -bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 200",
                          (match,)).fetchall()
        ref = [("%05d" % r, s) for r, s in rows]
        a = overlap(ours, ref)
        agree += a
        if len(set(q)) == 1:
            single += a
            single_n += 1
    elapsed = time.perf_counter() - start
    print(f"corpus: {len(docs)} documents, {len(queries)} queries")
    print(f"SQLite FTS5: indexed in {build:.2f} s ({len(docs) / build:.0f} documents/s), {len(queries) / elapsed:.0f} queries/s")
    print(f"top-10 agreement with FTS5 bm25: {agree / len(queries):.4f} over all queries, "
          f"{single / max(single_n, 1):.4f} over the {single_n} one-keyword queries")


def overlap(ours, ref):
    """Share of our top 10 in the reference's, ties at the cut included."""
    top = ref[:10]
    if not ours and not top:
        return 1.0
    if len(top) == 0:
        return 0.0
    cut = top[-1][1]
    ref_keys = {k for k, _ in top} | {k for k, s in ref if abs(s - cut) <= 1e-9 * max(1.0, abs(cut))}
    hits = sum(1 for k, _ in ours[:10] if k in ref_keys)
    return hits / max(len(ours[:10]), len(top))


if __name__ == "__main__":
    main()
