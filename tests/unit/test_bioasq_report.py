"""The report's paired statistics on hand-made data."""

import pytest

from graphs.bioasq.report import compare, paired_bootstrap


def _scored(name: str, right: list[bool]):
    from graphs.bioasq.report import Run

    scores = {f"q{i}": {"score": float(ok)} for i, ok in enumerate(right)}
    return Run(name, {"questions": []}, {}, "B", scores)


def test_compare_counts_discordant_yesno_pairs_and_tests_them_exactly():
    first = [True] * 8 + [False] * 2
    second = [True] * 2 + [False] * 8
    types = {f"q{i}": "yesno" for i in range(10)}
    result = compare(_scored("a", first), _scored("b", second), types)["yesno_mcnemar"]
    assert (result["b"], result["c"]) == (6, 0)  # b: only the first run right
    assert result["p_value"] == pytest.approx(2 * 0.5**6, abs=1e-4)  # exact two-sided binomial
    reverse = compare(_scored("b", second), _scored("a", first), types)["yesno_mcnemar"]
    assert (reverse["b"], reverse["c"]) == (0, 6)
    same = compare(_scored("a", [True, False]), _scored("b", [True, False]), types)
    assert same["yesno_mcnemar"] == {"b": 0, "c": 0, "p_value": 1.0}


def test_paired_bootstrap_interval_contains_the_difference_and_p_is_small_for_a_clear_gap():
    first = [0.9, 0.8, 1.0, 0.7, 0.9, 0.8, 1.0, 0.9, 0.8, 0.9]
    second = [x - 0.3 for x in first]
    result = paired_bootstrap(first, second)
    assert result["difference"] == pytest.approx(0.3)
    assert result["low"] <= 0.3 <= result["high"] and result["p_value"] == 0.0
    noisy = paired_bootstrap([1, 0, 1, 0], [0, 1, 0, 1])
    assert noisy["difference"] == 0.0 and noisy["p_value"] > 0.5
    assert paired_bootstrap([], [])["n"] == 0


def _run():
    from graphs.bioasq.report import Run

    records = {
        "q1": {"confidence": 0.2, "llm_calls": 7, "tokens": 1200, "seconds": 3.0},
        "q2": {"confidence": 0.9, "llm_calls": 7, "tokens": 1300, "seconds": 2.5},
        "q3": {"confidence": 0.5, "llm_calls": 8, "tokens": 900, "seconds": 4.0},
    }
    scores = {"q1": {"score": 0.0}, "q2": {"score": 0.0}, "q3": {"score": 1.0}}
    return Run("demo", {"questions": []}, records, "A+", scores)


def test_the_type_table_prints_counts_as_counts():
    from graphs.bioasq.report import type_table

    rows = type_table(_run(), {"q1": "yesno", "q2": "yesno", "q3": "factoid"})
    assert rows[0][0] == "yesno" and rows[0][4] == "7" and rows[0][5] == "1,250"
    assert rows[1][4] == "8" and rows[1][5] == "900"


def test_plots_are_drawn_with_labelled_axes_even_when_every_score_is_zero(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from graphs.bioasq.report import plots

    drawn = []
    original = plt.Figure.savefig

    def keep(fig, path, **kwargs):  # look at the figure as it is saved
        drawn.append(fig)
        return original(fig, path, **kwargs)

    plt.Figure.savefig = keep
    try:
        made = plots(_run(), {"q1": "yesno", "q2": "yesno", "q3": "factoid"}, tmp_path)
    finally:
        plt.Figure.savefig = original
    assert [p.name for p in made] == [
        "score_by_type.png",
        "confidence_vs_score.png",
        "latency_cost.png",
    ]
    for fig in drawn:
        for axis in fig.axes:
            assert axis.get_xlabel() and axis.get_ylabel()
            assert axis.get_legend() is not None
    bars = drawn[0].axes[0]
    labels = [text.get_text() for text in bars.texts]
    assert "0.00" in labels  # the all-zero bar is labelled, not invisible


# --- the support check's verdicts, counted ---------------------------------------------------


def test_the_report_counts_answers_by_who_verified_them():
    from graphs.bioasq.report import Run, support_counts, support_text

    def given(verified):
        return {"status": "ok", "support": {"verdict": "supported", "verified": verified}}

    records = {
        "a": given("supported"),
        "b": given("self-verified"),
        "c": given("self-verified"),
        "d": given("not verified"),
        "e": {"status": "ok"},  # journalled before records held their support
        "f": {"status": "insufficient", "support": {"verdict": "refused", "verified": "refused"}},
    }
    counts = support_counts(Run("r", {"questions": []}, records, "B"))
    assert counts == {
        "given": 5,
        "verified": 1,
        "self_verified": 2,
        "not_verified": 1,
        "unrecorded": 1,
        "refused": 1,
    }
    assert support_text(counts) == (
        "Answers: 5 given (1 verified by another model, 2 self-verified (judged only by their "
        "author), 1 not verified, 1 given before the journal recorded support); 1 refused "
        "(insufficient evidence)"
    )


def test_a_record_keeps_the_verdict_its_relevance_and_who_verified_it():
    from graphs.bioasq.journal import answer_support

    values = {
        "result": {
            "support": {
                "verdict": "supported",
                "verified": "self-verified",
                "judge": "self",
                "why": "PMID 1 supports it",
            }
        },
        "answer": {"support": {"verdict": "supported", "relevance": [{"pmid": "1", "kept": True}]}},
        "calls": [{"node": "ensemble", "model": "m"}, {"node": "verify", "model": "judge-1"}],
    }
    assert answer_support(values) == {
        "verdict": "supported",
        "verified": "self-verified",
        "judge": "self",
        "verifier": "judge-1",
        "relevance": [{"pmid": "1", "kept": True}],
        "why": "PMID 1 supports it",
    }
    older = {"result": {"support": {"verdict": "supported", "verified": "not verified"}}}
    assert answer_support(older)["relevance"] is None and answer_support(older)["judge"] is None
    assert answer_support({"result": {"support": None}}) is None  # nothing was to be answered
