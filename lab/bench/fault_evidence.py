"""Evidence for `quorum bench faults`: what a drill's files say about each injected fault.

Every fault the endpoint injected is traced to how it was absorbed, from what the run left
behind: the endpoint's request log and the call's record (the client retried the same request:
OpenAI's client counts its retries in a header, quorum's own records them on the call), the
checkpoints (the failed call and the node that carried on), the journal (failed, then answered
by a later run; interrupted by the kill, then resumed). Nothing is assumed absorbed without
such a trace.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from infra.bioasq.validate import validate_file
from infra.checkpoints import read_config, saver
from lab.bench.drill import Journal, Outage
from lab.simulate.faults import FAULT_KINDS, request_key
from prompts import template

CARRIED_ON = {
    "ensemble": "member_dropped",
    "synthesize": "synthesis_fell_back_to_vote",
    "generate_query": "query_repaired_or_keywords",
    "refine_query": "refine_relaxed_by_rules",
    "organize": "organize_carried_on",
}
ORGANIZE_CARRIED_ON = {
    "organize": "organize_kept_every_context",  # dedupe: no duplicate named, nothing dropped
    # CORG, the default for a served model: a failed relation call leaves its pair unrelated
    # (relations.build_relation_graph), a failed plural form leaves the question as asked.
    "organize_relation": "corg_pair_read_as_unrelated",
    "organize_pluralize": "corg_group_kept_the_question",
}
"""Organize's calls carry on by their prompt: every one is recorded under the node's name."""
HTTP_FAULTS = ("server_error", "rate_limit", "timeout")
FINISHED = ("ok", "insufficient")
"""Journal statuses of a question that is done: answered, or honestly insufficient (its
"Insufficient evidence: …" entry is in the submission); only "failed" is retried."""


def outcome(output: Path, testset: Path, journal: Journal, count: int) -> dict[str, Any]:
    """Return what the submission holds: answered, duplicates, valid (with its problems)."""
    wanted = {q["id"] for q in json.loads(testset.read_text(encoding="utf-8"))["questions"]}
    entries = json.loads(output.read_text())["questions"] if output.exists() else []
    in_file = Counter(e.get("id") for e in entries)
    answered = Counter(r["id"] for r in journal.records if r.get("status") in FINISHED)
    # Answered twice is a duplicate; an insufficient answer tried again on the re-run (as every
    # re-run does, issue 47: the support check may refuse a simulated answer) is not.
    twice = Counter(r["id"] for r in journal.records if r.get("status") == "ok")
    duplicates = {q for q, n in [*in_file.items(), *twice.items()] if n > 1}
    problems = validate_file(output, testset_path=testset, phase="A+") if output.exists() else []
    report = {
        "questions": count,
        # A failed question's 'insufficient evidence' stand-in is in the file, not answered.
        "answered": len(wanted & set(in_file) & set(answered)),
        "duplicates": len(duplicates),
        "valid": output.exists() and not problems,
    }
    if problems:
        report["problems"] = [str(p) for p in problems[:5]]
    return report


def read_threads(path: Path) -> list[dict[str, Any]]:
    """Return every checkpointed run: question id, first checkpoint time, calls, result."""
    if not path.exists():
        return []
    out = []
    with saver(path) as checkpointer:
        rows = checkpointer.conn.execute(
            "SELECT thread_id, MIN(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
            "GROUP BY thread_id"
        ).fetchall()
        for thread_id, first_id in rows:
            latest = checkpointer.get_tuple(read_config(thread_id))
            first = checkpointer.get_tuple(read_config(thread_id, first_id))
            values = latest.checkpoint.get("channel_values") or {}
            out.append(
                {
                    "thread_id": thread_id,
                    "id": (latest.metadata or {}).get("bioasq_id"),
                    "created": datetime.fromisoformat(first.checkpoint["ts"]).timestamp(),
                    "calls": values.get("calls") or [],
                    "finished": bool(values.get("result")),
                }
            )
    return out


def absorbed_llm(
    faults: list[dict[str, Any]],
    requests: list[dict[str, Any]],
    threads: list[dict[str, Any]],
    runs: list[dict[str, Any]],
) -> dict[str, Any]:
    """Say for every endpoint fault how it was absorbed, from the endpoint's log and the traces."""
    last_asked: dict[tuple[str, int], int] = {}
    for r in requests:
        last_asked[(r["key"], r["retry"])] = r["request"]
    failed_calls: dict[tuple[str, str], list[dict[str, Any]]] = {}
    retried: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for thread in threads:
        for call in thread["calls"]:
            if call.get("prompt") is None:
                continue
            key = request_key([m["content"] for m in call["prompt"]])
            if call.get("error"):
                failed_calls.setdefault((key, call["model"]), []).append(call)
            if call.get("retries"):
                # quorum's model client retries itself (infra/models/retries.py), so the
                # endpoint sees retry 0 each time; the call's record counts its retries.
                retried.setdefault((key, call["model"]), []).append(dict(call))
    asked_after: dict[tuple[str, str], int] = {}
    for r in requests:
        asked_after[(r["key"], r.get("model"))] = r["request"]
    killed = [r["requests"] for r in runs if r["exit"] == "killed"]
    out: dict[str, Any] = {}
    for kind in FAULT_KINDS:
        how: Counter[str] = Counter()
        unexplained: list[int] = []
        for fault in (f for f in faults if f["kind"] == kind):
            again = last_asked.get((fault["key"], fault["retry"] + 1), 0)
            calls = failed_calls.get((fault["key"], fault["model"]), [])
            if kind in HTTP_FAULTS and (
                again > fault["request"]
                or (
                    asked_after.get((fault["key"], fault["model"]), 0) > fault["request"]
                    and _take_retry(retried.get((fault["key"], fault["model"]), []), fault["at"])
                )
            ):
                how["client_retry"] += 1
            elif call := _take_call(calls, fault["at"]):
                how[_carried_on(call)] += 1
            elif any(lo <= fault["request"] <= hi for lo, hi in killed):
                how["interrupted_by_kill_then_rerun"] += 1
            else:
                how["unexplained"] += 1
                unexplained.append(fault["request"])
        count = sum(how.values())
        out[kind] = {"count": count, "absorbed": count - how["unexplained"], "how": dict(how)}
        if unexplained:
            out[kind]["unexplained_requests"] = unexplained
    if leftover := [(key, c) for (key, _), calls in failed_calls.items() for c in calls]:
        out["failed_calls_without_fault"] = _stray_calls(leftover, requests, threads)
    return out


def _stray_calls(
    leftover: list[tuple[str, dict[str, Any]]],
    requests: list[dict[str, Any]],
    threads: list[dict[str, Any]],
) -> dict[str, Any]:
    """Describe failed calls no fault explains: more such calls than requests means a cache hit."""
    asked = Counter(r["key"] for r in requests if r["retry"] == 0)
    made = Counter(
        request_key([m["content"] for m in call["prompt"]])
        for thread in threads
        for call in thread["calls"]
        if call.get("prompt") is not None
    )
    cached = sum(made[key] > asked[key] for key, _ in leftover)
    return {
        "count": len(leftover),
        "replayed_from_cache": cached,
        "by_node": dict(Counter(call["node"] for _, call in leftover)),
        "errors": sorted({call["error"][:100] for _, call in leftover}),
    }


def _carried_on(call: dict[str, Any]) -> str:
    """Name how the node that made a failed call carried on."""
    if call["node"] == "organize" and call.get("prompt"):
        said = call["prompt"][0].get("content", "")
        for name, how in ORGANIZE_CARRIED_ON.items():
            if said.startswith(template(name)[0].splitlines()[0]):
                return how
    return CARRIED_ON.get(call["node"], f"{call['node']}_carried_on")


def _take_retry(calls: list[dict[str, Any]], at: float) -> bool:
    """Spend one retry of a call that was in flight at `at`; say whether there was one."""
    for call in calls:
        started = call.get("started", 0.0)
        # 0.5 s of clock slack either side, as _take_call allows.
        inside = started - 0.5 <= at <= started + call.get("latency_s", 0.0) + 0.5
        if call["retries"] > 0 and inside:
            call["retries"] -= 1
            return True
    return False


def _take_call(calls: list[dict[str, Any]], at: float) -> dict[str, Any] | None:
    """Take the failed call a fault at `at` ended: the last one started before it."""
    before = [c for c in calls if c.get("started", 0.0) <= at + 0.5]  # 0.5 s of clock slack
    if not before:
        return None
    call = max(before, key=lambda c: c.get("started", 0.0))
    calls.remove(call)
    return call


def absorbed_kill(
    killed: dict[str, Any], runs: list[dict[str, Any]], journal: Journal, threads: list[dict]
) -> dict[str, Any]:
    """Say how the kill was absorbed: answers resumed from the journal, interrupted ones rerun."""
    after = runs[runs.index(killed) + 1] if killed is not runs[-1] else None
    journalled = {r.get("thread_id") for r in journal.records}
    lo, hi = killed["window"]
    interrupted = {
        t["id"]
        for t in threads
        if lo <= t["created"] <= hi and t["thread_id"] not in journalled and not t["finished"]
    }
    answered = {r["id"] for r in journal.records if r.get("status") in FINISHED}
    how = {
        "resumed_from_journal": after["resumed"] if after else 0,
        "interrupted_questions_rerun": len(interrupted & answered),
    }
    return {"count": 1, "absorbed": int(bool(after and after["resumed"])), "how": how}


def absorbed_outage(outage: Outage, journal: Journal) -> dict[str, Any]:
    """Say how the search outage was absorbed: questions answered or failed-then-answered."""
    lo, hi = outage.window
    during = [
        r for r, (at, _) in zip(journal.records, journal.seen, strict=True) if lo <= at <= hi + 1
    ]
    answered = {r["id"] for r in journal.records if r.get("status") in FINISHED}
    failed = {r["id"] for r in during if r.get("status") == "failed"}
    how = {
        "answered_during_outage": sum(r.get("status") in FINISHED for r in during),
        "failed_then_answered_on_later_run": len(failed & answered),
    }
    absorbed = not (failed - answered)
    return {"count": 1, "absorbed": int(absorbed), "how": how, "backend": outage.backend}


def failed_then_answered(journal: Journal) -> dict[str, Any]:
    """Return questions journalled failed and answered by a later run, by error."""
    answered = {r["id"] for r in journal.records if r.get("status") in FINISHED}
    errors: Counter[str] = Counter()
    for record in journal.records:
        if record.get("status") == "failed" and record["id"] in answered:
            errors[re.sub(r"^attempt \d+: ", "", record.get("error", ""))[:80]] += 1
    return {"count": sum(errors.values()), "errors": dict(errors)}


def table(report: dict[str, Any]) -> list[str]:
    """Return the report as a compact table."""
    lines = [
        f"questions {report['questions']}  answered {report['answered']}  "
        f"duplicates {report['duplicates']}  valid {'yes' if report['valid'] else 'NO'}  "
        f"runs {report['runs']}  seconds {report['seconds']}",
        f"{'fault':<14} {'injected':>8} {'absorbed':>8}  how",
    ]
    for kind, injected in report["faults_injected"].items():
        entry = report["faults_absorbed"].get(kind, {})
        how = ", ".join(f"{k} {v}" for k, v in entry.get("how", {}).items() if v)
        lines.append(f"{kind:<14} {injected:>8} {entry.get('absorbed', 0):>8}  {how}")
    retried = report["failed_then_answered"]
    if retried["count"]:
        lines.append(f"questions journalled failed, answered by a later run: {retried['count']}")
    if stray := report["faults_absorbed"].get("failed_calls_without_fault"):
        lines.append(
            f"failed calls no fault explains: {stray['count']} ({stray['replayed_from_cache']} "
            f"replayed from the LLM cache) by node {json.dumps(stray['by_node'])}"
        )
    for problem in report.get("problems", []):
        lines.append(f"problem: {problem}")
    return lines
