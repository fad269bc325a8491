"""The HTML trace export on hand-made steps: escaping, timeline, relation graph, votes, costs."""

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from graphs.describe import answer_lines, block_lines, call_view, trace_blocks
from graphs.traces.blocks_html import blocks_html
from graphs.traces.export import export_html
from infra.files import write_atomic
from nodes.answer_view import answer_view
from nodes.trace_view import CONFIDENCE, SUPPORT, AnswerBlock, Facts, Lines, Table

EVIL = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "answers"


def call(node, started, latency, *, raw='{"answer": "yes"}', tokens=(100, 20), **extra):
    return {
        "node": node,
        "model": "m1",
        "prompt": [
            {"role": "system", "content": "You answer biomedical questions."},
            {"role": "human", "content": f"[1] PMID 101\n{EVIL}\nQuestion: why?"},
        ],
        "temperature": 0.7,
        "started": started,
        "latency_s": latency,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "raw": raw,
        "error": None,
        **extra,
    }


RELATION_GRAPH = {
    "n": 4,
    "calls": 4,
    "naive_calls": 6,
    "rounds": [0],
    "pmids": ["101", "102", "103", EVIL],
    "edges": [
        {"pair": [0, 1], "label": "duplicated", "source": "asked", "mirrored": False, "via": None},
        {"pair": [0, 2], "label": "counterfactual", "source": "asked", "mirrored": False},
        {
            "pair": [1, 2],
            "label": "counterfactual",
            "source": "mirrored",
            "mirrored": True,
            "via": 0,
        },
        {"pair": [0, 3], "label": "none", "source": "failed", "mirrored": False, "error": EVIL},
        {"pair": [2, 3], "label": "distracting", "source": "asked", "mirrored": False},
    ],
}


def steps(*, corg=True):
    base = 1_700_000_000.0
    organize = {"organized": [{"pmid": "101"}], "calls": [call("organize", base + 1.1, 0.8)]}
    if corg:
        organize["relation_graph"] = RELATION_GRAPH
    return [
        {
            "node": "generate_query",
            "step": 0,
            "started": "2023-11-14T22:13:20+00:00",
            "seconds": 1.0,
            "update": {"query": "a OR b", "calls": [call("generate_query", base + 0.1, 0.9)]},
        },
        {
            "node": "organize",
            "step": 1,
            "started": "2023-11-14T22:13:21+00:00",
            "seconds": 1.0,
            "update": organize,
        },
        {
            "node": "ensemble",
            "step": 2,
            "started": "2023-11-14T22:13:22+00:00",
            "seconds": 2.0,
            "update": {
                "members": [
                    {
                        "model": "m1",
                        "view": 0,
                        "order": ["101", "102"],
                        "answer": ["yes"],
                        "pmids": ["101"],
                        "error": None,
                        "latency_s": 1.5,
                        "tokens": 120,
                    },
                    {
                        "model": "m2",
                        "view": 1,
                        "order": ["102", "101"],
                        "answer": [EVIL],
                        "pmids": [],
                        "error": None,
                        "latency_s": 1.9,
                        "tokens": 130,
                    },
                ],
                "votes": {
                    "strategy": "permute_vote",
                    "agreement": 0.5,
                    "distinct": 2,
                    "table": [
                        {"answer": "yes", "votes": 7, "variants": ["Yes"]},
                        {"answer": EVIL, "votes": 1},
                    ],
                    "ranked": ["yes", EVIL],
                },
                "calls": [
                    call("ensemble", base + 2.1, 1.5),
                    call("ensemble", base + 2.1, 1.9, raw=EVIL, tokens=(110, 20)),
                    call("ensemble", base + 2.2, 0.2, kind="loglikelihood", tokens=(50, 0)),
                ],
            },
        },
        {
            "node": "finalize",
            "step": 3,
            "started": "2023-11-14T22:13:24+00:00",
            "seconds": None,
            "update": {"result": {"exact_answer": "yes", "ideal_answer": EVIL, "documents": []}},
        },
    ]


class Page(HTMLParser):
    """What a browser would parse: tags, attributes, and the text of script elements."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.attrs, self.scripts, self._in_script = [], [], [], False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def test_everything_recorded_is_escaped():
    page = export_html(steps(), thread_id=f"t-{EVIL}", question=f"Why? {EVIL}")
    assert EVIL not in page
    assert page.count(ESCAPED) >= 8  # question, thread, prompt, raw, answer, vote, member, edge
    parsed = Page(page)
    assert parsed.tags.count("script") == 1 and "alert" not in "".join(parsed.scripts)
    assert not [a for a in parsed.attrs if a[1].startswith("on") and "alert" in (a[2] or "")]


def test_the_page_loads_nothing_from_elsewhere():
    page = export_html(steps(), thread_id="t1", question="q")
    parsed = Page(page)
    fetching = {"link", "img", "iframe", "object", "embed", "audio", "video", "source", "base"}
    assert not fetching & set(parsed.tags)
    assert not [a for a in parsed.attrs if a[1] in ("src", "href", "srcset")]
    assert "url(" not in page and "@import" not in page and "http:" not in page
    assert "default-src 'none'" in page  # a Content-Security-Policy that forbids fetching


def test_timeline_has_one_expandable_row_per_step_with_its_calls():
    page = export_html(steps(), thread_id="t1", question="q")
    assert page.count('<details class="step">') == 4
    bars = re.findall(r'class="bar" style="left:([\d.]+)%;width:([\d.]+)%"', page)
    assert len(bars) == 4
    # 4 s from the first step to the last call's end: organize starts a quarter in, lasts a quarter
    assert bars[1] == ("25.00", "25.00") and float(bars[2][0]) == 50.0
    assert page.count('class="tick"') == 5  # one per call with a start time
    assert page.count('<details class="call">') == 5
    assert "You answer biomedical questions." in page and "raw output" in page
    assert "kind loglikelihood" in page and "temperature 0.7" in page


def test_relation_graph_is_an_svg_with_coloured_and_dashed_edges():
    page = export_html(steps(), thread_id="t1", question="q")
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count("<line") == 5 and svg.count("<circle") == 4
    assert svg.count('stroke-dasharray="6 4"') == 1  # the one mirrored edge
    assert svg.count('stroke="#d62728"') == 2  # both counterfactual edges share a colour
    assert "[2] 102 ~ [3] 103: counterfactual (mirrored via [1] 101)" in svg
    assert "4 contexts, 4 relation calls for 6 pairs; anchors [1] 101" in page
    edge_rows = page[page.index("</svg>") :].split("</table>")[0]
    assert edge_rows.count("<tr>") == 6  # header and five edges
    assert f"failed ({ESCAPED})" in edge_rows


def test_no_svg_without_a_relation_graph():
    page = export_html(steps(corg=False), thread_id="t1", question="q")
    assert "<svg" not in page and "Relation graph" not in page


def test_vote_table_and_members_are_rendered():
    page = export_html(steps(), thread_id="t1", question="q")
    assert '<td>yes</td><td class="n">7</td><td>Yes</td>' in page
    assert f'<td>{ESCAPED}</td><td class="n">1</td>' in page
    assert "strategy permute_vote: 2 member call(s), agreement 0.50, 2 distinct answer(s)" in page
    assert '<td>m2</td><td class="n">1</td><td>102 101</td>' in page


def test_the_page_shows_the_blocks_the_text_view_prints():
    """One source: every fact, table cell and line of a node's trace blocks is on the page."""
    page = export_html(steps(), thread_id="t1", question="q")
    shown = 0
    for step in steps():
        blocks, _ = trace_blocks(step["node"], step["update"])
        for block in blocks:
            if isinstance(block, Facts):
                texts = [block.text]
            elif isinstance(block, Table):
                texts = [block.title, *block.header, *(c for row in block.rows for c in row)]
            elif isinstance(block, Lines):
                texts = list(block.lines)
            elif isinstance(block, AnswerBlock):  # finalize's: the answer as ask prints it
                texts = [t for t in (block.exact, block.ideal, block.confidence) if t]
                texts += [cited.pmid for cited in block.evidence or ()]
            else:
                texts = [block.summary(), *(block.how(edge) for edge in block.edges)]
            for text in texts:
                assert html.escape(text) in page, text
                shown += 1
    assert shown > 40


def test_costs_per_node_and_in_total():
    page = export_html(steps(), thread_id="t1", question="q")
    costs = page[page.index("<h2>Costs</h2>") :]
    rows = re.findall(r"<tr(?: class=\"total\")?>(.*?)</tr>", costs)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows[1:]]
    by_node = {c[0]: c[1:] for c in cells}
    # steps, wall s, calls, input, output, tokens, call latency s
    assert by_node["ensemble"] == ["1", "2.000", "3", "260", "40", "300", "3.600"]
    assert by_node["finalize"] == ["1", "0.000", "0", "0", "0", "0", "0.000"]
    assert by_node["total"] == ["4", "4.000", "5", "460", "80", "540", "5.300"]


def test_an_unfinished_run_says_so():
    page = export_html(steps()[:2], thread_id="t1", question="q")
    assert "did not finish" in page


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "trace.html"
    target.write_text("old")
    write_atomic(target, "<p>new</p>")
    assert target.read_text() == "<p>new</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.html"]
    assert target.stat().st_mode & 0o044  # readable by others, unlike a mkstemp file


def test_documents_are_listed_with_their_titles_and_the_timeline_has_a_legend():
    trace = steps()
    trace[-1]["update"]["result"] |= {
        "documents": ["101", "202"],
        "titles": {"101": "Aspirin and colorectal cancer", "202": EVIL},
    }
    page = export_html(trace, thread_id="t", question="q")
    assert "<code>101</code> Aspirin and colorectal cancer" in page
    assert "<code>202</code> " + html.escape(EVIL) in page
    assert "time in the node" in page and "one model call" in page


def test_the_answer_shows_cited_evidence_with_sentences_apart_from_retrieval_order():
    trace = steps()
    result = json.loads((ANSWERS / "cited.json").read_text())
    result["evidence"][0]["sentence"] = EVIL
    trace[-1]["update"]["result"] = result
    page = export_html(trace, thread_id="t", question="q")
    answer = page[page.index("<h2>Answer</h2>") : page.index("<h2>Timeline</h2>")]
    assert "<th>Exact answer (yesno)</th><td>yes</td>" in answer
    assert "<th>Confidence</th><td>0.40 from the evidence (model said 0.95)</td>" in answer
    evidence, retrieved = answer.split("<th>Cited evidence</th>")[1].split("Retrieved documents")
    assert (
        "<code>203</code> Thrombocytopenia after rivoparin: a cohort study"
        f'<blockquote class="sentence">{html.escape(EVIL)}</blockquote>' in evidence
    )
    assert "Platelet counts fell below 100,000 in 11 of 360 patients" in evidence
    assert retrieved.startswith(" (retrieval order)</th>")
    order = [retrieved.index(f"<code>{p}</code>") for p in result["documents"]]
    assert order == sorted(order)  # retrieval order, the cited ones not moved up
    assert retrieved.count('<span class="cited">cited</span>') == 2
    assert "best first" not in page and EVIL not in page


def test_the_answer_is_shown_once_at_the_top_and_finalize_points_to_it():
    trace = steps()
    trace[-1]["update"]["result"] = json.loads((ANSWERS / "cited.json").read_text())
    page = export_html(trace, thread_id="t", question="q")
    assert page.count("<th>Cited evidence</th>") == 1
    assert page.index("<th>Cited evidence</th>") < page.index("<h2>Timeline</h2>")
    finalize = page[page.index("<h2>finalize · step 3</h2>") :]
    assert "The answer it made is at the top of this page." in finalize
    # The negative control: a run that never finished has no answer at the top to point to.
    unfinished = export_html(trace[:-1], thread_id="t", question="q")
    assert "did not finish" in unfinished and "at the top of this page" not in unfinished


def test_an_insufficient_answer_is_marked_and_cites_nothing():
    trace = steps()
    trace[-1]["update"]["result"] = json.loads((ANSWERS / "insufficient.json").read_text())
    page = export_html(trace, thread_id="t", question="q")
    assert "Insufficient evidence: no ensemble member could answer" in page
    assert "(insufficient evidence)" in page
    assert "<th>Cited evidence</th><td>none: the answer cites no passage</td>" in page


def test_the_answer_and_a_call_read_the_same_in_text_and_in_the_export():
    """One description each (`answer_view`, `call_view`), drawn as HTML and printed as text."""
    result = json.loads((ANSWERS / "cited.json").read_text())
    result["support"] = {"verdict": "supported", "verified": "verified by m1"}
    trace = steps()
    trace[-1]["update"]["result"] = result
    page = export_html(trace, thread_id="t", question="q")
    answer = answer_view(result)
    shown = answer_lines(result)  # ask and chat
    for label, said in ((CONFIDENCE, answer.confidence), (SUPPORT, answer.support)):
        assert f"{label}: {said}" in shown
        assert f"<th>{label}</th><td>{html.escape(said)}</td>" in page
    made = call_view(call("synthesize", None, 0.5, kind="loglikelihood"), label="call 1/1")
    facts = ("m1", "kind loglikelihood", "temperature 0.7", "0.50s", "100 in + 20 out tokens")
    assert block_lines(made)[0] == f"call 1/1: {', '.join(facts)}"  # trace show --node
    assert f"<summary>call 1/1 · {' · '.join(facts)}</summary>" in blocks_html([made])
