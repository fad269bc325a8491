"""The runs `quorum eval methods` makes beside each method: its controls and the papers' ablations.

A control is the method's own settings, its K (members) and m (contexts) included, with one
mechanism removed: CoBag without its shuffle (NoShuffle) or with uniform sampling (Uniform),
and permute_vote at CoBag's K and m; CCV counting the same members' answers (answer_count);
MoI with flat position weights; CORG without its pair relations (organize.corg_relations
"none"). Each is compared with the method question by question (answers.paired: McNemar's
exact p, Newcombe's interval of the accuracy difference); `beats_control` is true only when
that interval lies above 0, and a method that does not beat its control is reported as such.

The ablations (`--ablations`, as each multiplies the runs) are the papers' tables: CCV at
K = 5, 10, 15, 20 against answer_count at the same K; MoI's permutation schemes; CORG's
baselines (organize.strategy), scored by answer recall (the CORG paper's "Ans": a gold answer
among the answers the decision surfaced). The paper's primary D-F1 needs a SQuAD-2 RoBERTa QA
model to extract answers, which is not available offline, so it is not reported. CoBag's
NoShuffle/Uniform table comes from its controls at no extra cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from infra.settings import Settings
from infra.settings.methods import OrganizeSettings
from infra.stats import paired, wilson

CORG = "corg"
CORG_ANSWERS = "organize"
"""CORG's arms answer each group in one organize call, the paper's aggregator, as its
baselines answer theirs: CORG and each baseline then differ only in how they group."""
CORG_ENSEMBLE = "single"
"""No member is asked where organize answered the groups; one keeps the settings honest."""
CCV_MEMBERS = (5, 10, 15, 20)
"""The K of the CCV paper's ablation (its Figure: no gain over majority at 5, its best at 20)."""
MOI_PERMUTATIONS = ("random", "cyclic", "prefix", "variable")
CORG_BASELINES = ("base", "separate", "random", "kmeans", "retrieve", "summarize")
WITHOUT_COUNTERFACTUAL = "without_counterfactual"
"""The case variant with each planted counterfactual passage (and its duplicate) left out."""
D_F1_NOTE = (
    "D-F1 needs a SQuAD-2 RoBERTa QA model to extract answers, not available offline; "
    "answer_recall is the paper's 'Ans'"
)


@dataclass(frozen=True)
class Arm:
    """One run over the cases: a strategy's settings under a label."""

    label: str
    """The run's name in rows: a strategy, 'method/control' or 'method/ablation/...'."""
    method: str
    """The strategy family it belongs to: an ensemble strategy or "corg"."""
    settings: Settings
    cases: str = "all"
    """"all", or WITHOUT_COUNTERFACTUAL (only cases with a planted counterfactual, without it)."""


def _with(settings: Settings, path: str, **changes: Any) -> Settings:
    """Return settings with fields of one nested group (dotted path) changed, the rest copied."""
    head, _, rest = path.partition(".")
    group = getattr(settings, head)
    group = _with(group, rest, **changes) if rest else group.model_copy(update=changes)
    return settings.model_copy(update={head: group})


def strategy_settings(settings: Settings, name: str) -> Settings:
    """Return the settings that run one strategy: an ensemble strategy, or CORG."""
    if name == CORG:
        settings = _with(settings, "organize", strategy=CORG, corg_answers=CORG_ANSWERS)
        return _with(settings, "ensemble", strategy=CORG_ENSEMBLE)
    # An ensemble strategy's arm runs at its paper's setting, over the question's top-m:
    # dedupe, whatever organize.strategy says. "auto" would run CORG on the planted reader's
    # endpoint, and each strategy would then vote inside CORG's groups (the default pipeline):
    # groups of a few passages, fewer than the paper's m, where CoBag's bags, CCV's N and
    # MoI's orders are not the papers' (CoBag's pool would be the group, its bags differing in
    # order only), and every arm and control would share CORG's grouping and its calls. What
    # the papers' tables compare is each method against its control on the same top-m.
    settings = _with(settings, "organize", strategy="dedupe")
    return _with(settings, "ensemble", strategy=name)


def shape(settings: Settings, method: str) -> tuple[int, int]:
    """Return (members, contexts) a run shows: K answering views per model, m passages each.

    single and MoI answer once per model (MoI observes its orders' likelihoods, then answers
    from one debiased order); CORG (organize answering, CORG_ANSWERS) answers once per group
    from the top organize.top_k.
    """
    ensemble = settings.ensemble
    if method == CORG:
        return 1, settings.organize.top_k
    return {
        "single": (1, ensemble.contexts),
        "self_consistency": (ensemble.members, ensemble.contexts),
        "permute_vote": (ensemble.members, ensemble.contexts),
        "cobag": (ensemble.cobag.members, ensemble.cobag.contexts),
        "ccv": (ensemble.ccv.members, ensemble.ccv.contexts),
        "moi": (1, ensemble.contexts),
    }[ensemble.strategy]


def _cobag_permute_vote(method: Settings) -> Settings:
    cobag = method.ensemble.cobag
    return _with(
        method, "ensemble", strategy="permute_vote", members=cobag.members, contexts=cobag.contexts
    )


CONTROLS: dict[str, dict[str, Callable[[Settings], Settings]]] = {
    "cobag": {
        "no_shuffle": lambda s: _with(s, "ensemble.cobag", shuffle=False),
        "uniform": lambda s: _with(s, "ensemble.cobag", sampling="uniform"),
        "permute_vote": _cobag_permute_vote,
    },
    "ccv": {"answer_count": lambda s: _with(s, "ensemble.ccv", vote="answer_count")},
    "moi": {"flat_weights": lambda s: _with(s, "ensemble.moi", weights="flat")},
    CORG: {"no_relations": lambda s: _with(s, "organize", corg_relations="none")},
}
"""Per method, its controls: the method's settings with one mechanism removed."""


def skipped_controls() -> dict[str, dict[str, str]]:
    """Return the controls these settings cannot express, with why (reported, never run)."""
    if "corg_relations" not in OrganizeSettings.model_fields:
        return {CORG: {"no_relations": "organize.corg_relations is not a setting of this build"}}
    return {}


def plan_arms(settings: Settings, strategies: Sequence[str], *, ablations: bool) -> list[Arm]:
    """Return every run: each strategy, its controls, CORG's no-conflict variant, ablations."""
    skipped = skipped_controls()
    arms = []
    for name in strategies:
        method = strategy_settings(settings, name)
        arms.append(Arm(name, name, method))
        for control, knock_out in CONTROLS.get(name, {}).items():
            if control not in skipped.get(name, {}):
                arms.append(Arm(f"{name}/{control}", name, knock_out(method)))
        if name == CORG:
            arms.append(
                Arm(f"{name}/{WITHOUT_COUNTERFACTUAL}", name, method, WITHOUT_COUNTERFACTUAL)
            )
        if ablations:
            arms += _ablation_arms(name, method)
    return arms


def _ablation_arms(name: str, method: Settings) -> list[Arm]:
    if name == "ccv":
        return [
            Arm(
                f"ccv/members/{k}/{vote}", name, _with(method, "ensemble.ccv", members=k, vote=vote)
            )
            for k in CCV_MEMBERS
            for vote in ("citation", "answer_count")
        ]
    if name == "moi":
        return [
            Arm(f"moi/permutations/{p}", name, _with(method, "ensemble.moi", permutations=p))
            for p in MOI_PERMUTATIONS
        ]
    if name == CORG:
        return [
            Arm(f"corg/baselines/{b}", name, _with(method, "organize", strategy=b))
            for b in CORG_BASELINES
        ]
    return []


def measured(arm: Arm, correct: list[bool]) -> dict[str, Any]:
    """Return one run's accuracy, its Wilson interval, and the K and m it ran at."""
    right, n = sum(correct), len(correct)
    members, contexts = shape(arm.settings, arm.method)
    return {
        "accuracy": round(right / n, 4) if n else None,
        "ci95": wilson(right, n),
        "members": members,
        "contexts": contexts,
    }


def compared(arm: Arm, correct: list[bool], reference: list[bool], **extra: Any) -> dict[str, Any]:
    """Return one run measured and compared, question by question, with the reference's."""
    test = paired(reference, correct)
    return (
        measured(arm, correct)
        | extra
        | {
            "paired": test,
            "beats_control": test["diff_ci95"][0] > 0,
        }
    )


def controls_report(
    arms: dict[str, Arm], correct: dict[str, list[bool]], strategies: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Return "controls": per chosen method, each control measured and paired with the method."""
    report: dict[str, dict[str, Any]] = {}
    for name in strategies:
        if name not in CONTROLS:
            continue
        mine = report[name] = {}
        for control in CONTROLS[name]:
            label = f"{name}/{control}"
            if label in arms:
                mine[control] = compared(arms[label], correct[label], correct[name])
            else:
                mine[control] = {"skipped": skipped_controls()[name][control]}
    return report


def ablations_report(
    arms: dict[str, Arm],
    correct: dict[str, list[bool]],
    recalled: dict[str, list[bool]],
    strategies: Sequence[str],
) -> dict[str, Any]:
    """Return "ablations": the papers' tables for the chosen methods that were run."""
    report: dict[str, Any] = {}
    if "cobag" in strategies:
        cobag = {"cobag": measured(arms["cobag"], correct["cobag"])}
        for control in ("no_shuffle", "uniform"):
            label = f"cobag/{control}"
            cobag[control] = compared(arms[label], correct[label], correct["cobag"])
        report["cobag"] = cobag
    if "ccv/members/5/citation" in arms:
        report["ccv"] = {}
        for k in CCV_MEMBERS:
            citation, count = f"ccv/members/{k}/citation", f"ccv/members/{k}/answer_count"
            report["ccv"][str(k)] = {
                "citation": measured(arms[citation], correct[citation]),
                "answer_count": compared(arms[count], correct[count], correct[citation]),
            }
    if "moi/permutations/random" in arms:
        labels = {p: f"moi/permutations/{p}" for p in MOI_PERMUTATIONS}
        report["moi"] = {
            p: compared(arms[label], correct[label], correct["moi"]) for p, label in labels.items()
        }
    if "corg/baselines/base" in arms:
        runs = {CORG: CORG} | {b: f"corg/baselines/{b}" for b in CORG_BASELINES}
        report[CORG] = {
            "measure": "answer_recall",
            "d_f1": None,
            "note": D_F1_NOTE,
            "strategies": {
                CORG: measured(arms[CORG], correct[CORG])
                | {"answer_recall": _share(recalled[CORG])}
            }
            | {
                name: compared(
                    arms[label],
                    correct[label],
                    correct[CORG],
                    answer_recall=_share(recalled[label]),
                )
                for name, label in runs.items()
                if name != CORG
            },
        }
    return report


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def control_lines(report: dict[str, Any]) -> list[str]:
    """Return the text table's lines of the controls and ablations, beside their methods."""
    lines = []
    for name, controls in (report.get("controls") or {}).items():
        for control, got in controls.items():
            lines.append(_line(f"  {name} vs {control}", got))
            if "paired" in got and not got["beats_control"]:
                lines.append(f"    {name} does not beat {control} (paired 95% CI not above 0)")
    ablations = report.get("ablations") or {}
    if ccv := ablations.get("ccv"):
        lines.append("ablation ccv: citation vs answer_count at the same K")
        for k, row in ccv.items():
            lines.append(_line(f"  K={k} citation", row["citation"]))
            lines.append(_line(f"  K={k} answer_count", row["answer_count"]))
    if moi := ablations.get("moi"):
        lines.append("ablation moi: permutation schemes (paired against moi)")
        lines += [_line(f"  {scheme}", got) for scheme, got in moi.items()]
    if corg := ablations.get(CORG):
        lines.append(f"ablation corg: baselines, answer recall ({corg['note']})")
        for name, got in corg["strategies"].items():
            lines.append(_line(f"  {name} (recall {got['answer_recall']})", got))
    return lines


def _line(label: str, got: dict[str, Any]) -> str:
    if "skipped" in got:
        return f"{label:<34}skipped: {got['skipped']}"
    accuracy = "—" if got["accuracy"] is None else f"{got['accuracy']:.3f}"
    lo, hi = got["ci95"]
    text = f"{label:<34}{accuracy:>7} [{lo:.3f}, {hi:.3f}]  K={got['members']} m={got['contexts']}"
    if test := got.get("paired"):
        text += f"  a/b {test['method_only']}/{test['control_only']} p={test['p']:.3g}"
    return text
