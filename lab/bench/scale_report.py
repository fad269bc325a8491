"""What `quorum bench scale`'s report concludes from the figures it measured.

Targets met, sizes scaled and latencies projected to PubMed's 26 M documents: pure functions of
the report's sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TARGET = 26_000_000
"""The PubMed baseline BioASQ runs over: what the figures are extrapolated and projected to."""
NUMBA_FACTOR = 1.5
"""How much slower than bm25s with numba the embedded engine's BM25 top-1000 may be (issue 30)."""
FULL_SIZE = 5_000_000
"""From this size on a corpus is judged by issue 31's full-size targets, not issue 18's 1 M ones."""
ISSUE_31 = {
    "bm25_p50_ms": (("bm25_top1000_p50_ms",), 20.0),
    "default_p50_ms": (("default_10000_to_300_p50_ms",), 50.0),
    "dense_p50_ms": (("dense_top100_p50_ms",), 50.0),
    "open_s": (("open_s",), 1.0),
    # The default configuration's query path (the dense stage is off by default; on, its IVF
    # lists add to the heap: query_peak_rss_mib has both, and is all a report from before the
    # default path's own peak was taken has).
    "default_path_peak_rss_mib": (("default_path_peak_rss_mib", "query_peak_rss_mib"), 8192.0),
}
"""Issue 31's targets: each its name in the report, the figures it reads (the first present) and
its limit."""
CURVE_FROM = 1_000_000
"""Smallest size a latency or memory curve is fitted through: below it fixed costs (opening a
segment, handing 1,000 hits to Python) weigh as much as the postings walked."""
NOT_PROJECTED = {"open_s"}
"""Opening follows the index's segments, not its documents (from a cold cache 0.35 s for 8-9
segments at 5 and 10 M, 1.77 s for 30 at 26 M in two shards): no curve of the size."""
CODES_MATTER = {"default_path_peak_rss_mib"}
"""Figures that row codes change: the default path's memory (at 26 M they took the query
process's peak from 13.5 to 4.6 GiB, reading ~1,270 int8 rows a question instead of 9,760). Its
latency they moved by noise (45.7 -> 45.3 ms in one index)."""


def figure(embedded: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    """Return the first of `keys` that `embedded` measured, or None."""
    return next((embedded[key] for key in keys if embedded.get(key) is not None), None)


def targets(sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Check the embedded engine against issues 18's, 30's and 31's targets.

    Issue 18, at sizes from 1 M up to `FULL_SIZE`: default path p50 ≤ 30 ms, BM25 top-1000 p50 no
    slower than bm25s's default numpy backend in the same run, opening ≤ 1 s and ≤ 200 MB.
    Issue 30, at every size: BM25 top-1000 p50 within `NUMBA_FACTOR` of bm25s with numba, its
    fastest. Issue 31, from `FULL_SIZE` on: `ISSUE_31`.
    """
    out: dict[str, Any] = {}
    for size, figures in sizes.items():
        embedded, peer = figures.get("embedded"), figures.get("bm25s") or {}
        if not embedded:
            continue
        bm25 = embedded["bm25_top1000_p50_ms"]
        checks = {}
        if int(size) >= FULL_SIZE:
            checks = {
                name: (value, limit)
                for name, (keys, limit) in ISSUE_31.items()
                if (value := figure(embedded, keys)) is not None
            }
        elif int(size) >= 1_000_000:
            checks = {
                "default_p50_ms": (embedded["default_10000_to_300_p50_ms"], 30.0),
                "open_s": (embedded["open_s"], 1.0),
                "open_rss_mib": (embedded["open_rss_mib"], 200.0),
            }
            if "bm25s_top1000_p50_ms" in peer:
                checks["bm25_p50_ms_vs_bm25s"] = (bm25, peer["bm25s_top1000_p50_ms"])
        if "bm25s_numba_top1000_p50_ms" in peer:
            limit = round(NUMBA_FACTOR * peer["bm25s_numba_top1000_p50_ms"], 3)
            checks["bm25_p50_ms_vs_bm25s_numba"] = (bm25, limit)
        if checks:
            out[size] = {
                name: {"measured": value, "target": limit, "met": value <= limit}
                for name, (value, limit) in checks.items()
            }
    return out


def extrapolate(sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scale what grows with the corpus (disk, vectors) linearly to 26 million documents.

    Each engine from the largest size it was measured at (`from_size`; Elasticsearch stops at
    `--elasticsearch-up-to`); latencies are left to `project`'s curve: they depend on the
    queries' postings, which grow with the corpus but not in proportion. Opening the embedded
    index maps its files, so its memory is given as measured, not scaled.
    """
    out: dict[str, Any] = {"from_size": int(max(sizes, key=int))}
    engines = dict.fromkeys(b for figures in sizes.values() for b in figures)
    for backend in engines:
        largest = max((size for size in sizes if backend in sizes[size]), key=int)
        figures, factor = sizes[largest][backend], TARGET / int(largest)
        keys = ("disk_mib_with_vectors", "vectors_mib")
        scaled: dict[str, Any] = {
            key.replace("_mib", "_gib"): round(figures[key] * factor / 1024, 1)
            for key in keys
            if key in figures
        }
        if backend == "embedded":
            scaled["open_rss_mib_measured"] = figures.get("open_rss_mib")
        if scaled and int(largest) != out["from_size"]:
            scaled["from_size"] = int(largest)
        if scaled:
            out[backend] = scaled
    return out


def project(sizes: dict[str, dict[str, Any]], codes_from: int) -> dict[str, Any]:
    """Project the embedded engine's latencies and memory to 26 M along the measured curve.

    A power law, value = c · size^b, fitted by least squares on the logarithms through every
    size from `CURVE_FROM` up that measured the figure (at least two, all below `TARGET`: a run
    that reached 26 M is judged by `targets` on what it measured), for each of `ISSUE_31` but
    `NOT_PROJECTED`. Those in `CODES_MATTER` are fitted only through sizes that, as 26 M would
    from `codes_from` rows on, had row codes: a curve across the change would not project them.
    Each figure gives its exponent (1 grows with the corpus, 0 not at all), the sizes fitted and
    the value at `TARGET` against its target; one that cannot be fitted says why. A projection,
    not a measurement: the machine, the shard count and the index's segments move the curve.
    """
    embedded = {
        int(size): figures["embedded"]
        for size, figures in sizes.items()
        if "embedded" in figures and int(size) >= CURVE_FROM
    }
    if not embedded or max(embedded) >= TARGET:
        return {}
    out: dict[str, Any] = {}
    with_codes = codes_from <= TARGET
    for name, (keys, target) in ISSUE_31.items():
        if name in NOT_PROJECTED:
            continue
        codes_matter = name in CODES_MATTER
        points = []
        for size, figures in sorted(embedded.items()):
            value = figure(figures, keys)
            had_codes = bool(figures.get("row_codes_mib"))
            if value is None or value <= 0 or (codes_matter and had_codes != with_codes):
                continue
            points.append((size, float(value)))
        if len(points) < 2:
            regime = " with row codes (as 26 M would have)" if codes_matter and with_codes else ""
            out[name] = {
                "not_projected": f"{len(points)} size(s) from 1 M measured it{regime}: a curve "
                "needs two"
            }
            continue
        logs = np.log([[size, value] for size, value in points])
        exponent, intercept = np.polyfit(logs[:, 0], logs[:, 1], 1)
        value = float(np.exp(intercept) * TARGET**exponent)
        out[name] = {
            "sizes": [size for size, _ in points],
            "exponent": round(float(exponent), 3),
            "at_26m": round(value, 1),
            "target": target,
            "met": value <= target,
        }
    return out


AGREE = ("model", "seed", "real_docs", "questions", "machine")
"""What every merged report must share: the same real documents, questions and embedding model
resampled with the same seed, measured on one machine — else their sizes are not one curve."""


def merge(reports: list[tuple[str, dict[str, Any]]], codes_from: int) -> dict[str, Any]:
    """Put the sizes of several `bench scale` reports on one report, and conclude from them all.

    For a curve too long to measure in one sitting (1 M, 5 M and 10 M at PubMed's length are ~4
    hours on 2 cores): each run measures some sizes and engines, and the merge recomputes the
    extrapolation, the targets and the projection over their union. `merged_from` names the
    report each (size, engine) came from. Refuses (ValueError, naming both reports) what is not
    one curve: reports that differ in `AGREE`, or that both measured the same size on the same
    engine.
    """
    if not reports:
        raise ValueError("no report to merge")
    for name, report in reports:
        if not isinstance(report, dict) or not isinstance(report.get("sizes"), dict):
            raise ValueError(f"{name}: not a `quorum bench scale --json` report (no sizes)")
    first_name, first = reports[0]
    sizes: dict[str, dict[str, Any]] = {}
    origin: dict[tuple[str, str], str] = {}
    not_run: list[dict[str, Any]] = []
    merged_from = []
    for name, report in reports:
        for key in AGREE:
            if report.get(key) != first.get(key):
                raise ValueError(
                    f"{name} and {first_name} differ in {key} ({report.get(key)!r} against "
                    f"{first.get(key)!r}): their sizes are not one curve"
                )
        measured: dict[str, list[str]] = {}
        for size, engines in report["sizes"].items():
            for engine, figures in engines.items():
                if (size, engine) in origin:
                    raise ValueError(
                        f"{name} and {origin[size, engine]} both measured {engine} at {size}: "
                        "merge one of them"
                    )
                origin[size, engine] = name
                sizes.setdefault(size, {})[engine] = figures
                measured.setdefault(size, []).append(engine)
        not_run += report.get("not_run", [])
        merged_from.append({"report": name, "sizes": measured})
    ordered = {size: sizes[size] for size in sorted(sizes, key=int)}
    measured_pairs = {(int(size), engine) for size, engine in origin}
    shares = [r.get("query_postings_share_real_abstracts") for _, r in reports]
    return {
        **{key: first.get(key) for key in AGREE},
        "query_postings_share_real_abstracts": next((s for s in shares if s), None),
        "sizes": ordered,
        "not_run": [n for n in not_run if (n["size"], n["backend"]) not in measured_pairs],
        "merged_from": merged_from,
        "extrapolated_26m": extrapolate(ordered),
        "targets": targets(ordered),
        "projected_26m": project(ordered, codes_from),
    }
