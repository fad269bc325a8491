"""`quorum bench embed`: the encoder timed on real abstracts, here on CPU with a tiny model."""

import json

import pytest
from typer.testing import CliRunner

from graphs.cli import app
from graphs.cli.common import CliError
from infra.errors import UserError
from lab.bench.embed import PUBMED_ABSTRACTS, bench_embed, main, read_texts
from tests.support.data import CORPUS
from tests.support.tiny_models import write_tiny_sentence_transformer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_sentence_transformer(tmp_path_factory.mktemp("st") / "m", seed=2)


def test_texts_are_cycled_to_the_size_and_joined_to_the_length_asked_for():
    plain = read_texts(CORPUS, 2000)
    assert len(plain) == 2000 and plain[707] == plain[0]  # 707 documents, then again
    long = read_texts(CORPUS, 50, words=250)
    assert len(long) == 50 and min(len(t.split()) for t in long) >= 250


def test_every_worker_count_is_timed_with_the_same_vectors_and_the_26m_projection(tiny):
    report = bench_embed(tiny, CORPUS, size=40, device="cpu", workers=[0, 2], batch_size=8)
    assert [r["workers"] for r in report["runs"]] == [0, 2]
    assert [r["path"] for r in report["runs"]] == ["encode", "pipelined"]
    for run in report["runs"]:
        assert run["docs_per_s"] > 0 and run["gpu_peak_mib"] is None
        assert run["hours_for_26m"] == pytest.approx(
            PUBMED_ABSTRACTS / run["docs_per_s"] / 3600,
            rel=0.1,  # docs/s is rounded
        )
    assert report["docs"] == 40 and report["batch_size"] == 8
    assert report["best_docs_per_s"] == max(r["docs_per_s"] for r in report["runs"])
    assert 0 < report["tokens_per_text_mean"] <= report["max_seq_length"]


def test_the_module_runs_alone_as_on_a_bare_gpu_machine(tiny, capsys):
    assert (
        main(
            [
                "--model",
                str(tiny),
                "--corpus",
                str(CORPUS),
                "--docs",
                "9",
                "--device",
                "cpu",
                "--workers",
                "1",
                "--words",
                "100",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["runs"][0]["workers"] == 1 and report["words_per_text_mean"] >= 100


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--workers", "x"], "--workers 'x'"),
        (["--workers", "-1"], "--workers '-1'"),
        (["--device", "tpu"], "unknown --device 'tpu'"),
        (["--corpus", "/nonexistent.jsonl"], "/nonexistent.jsonl: no such file"),
        (["--model", "/tmp"], "/tmp: no model there"),
    ],
)
def test_bad_input_is_named_before_any_model_loads(args, named):
    # quorum's main() prints a CliError/UserError as one line and exits 2 (test_cli.py)
    result = CliRunner().invoke(app, ["bench", "embed", "--corpus", str(CORPUS), *args])
    assert isinstance(result.exception, CliError | UserError), result.output
    assert named in str(result.exception)


def test_end_to_end_indexes_and_embeds_every_text_through_the_commands_own_functions(tiny):
    result = CliRunner().invoke(
        app,
        [
            "bench", "embed", "--corpus", str(CORPUS), "--model", str(tiny), "--docs", "30",
            "--words", "60", "--device", "cpu", "--workers", "2", "--end-to-end", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    command = json.loads(result.stdout)["command"]
    assert command["docs"] == command["indexed"] == command["embedded"] == 30
    assert command["embed_docs_per_s"] > 0 and command["index_docs_per_s"] > 0
    assert command["hours_for_26m"] == pytest.approx(
        PUBMED_ABSTRACTS / command["embed_docs_per_s"] / 3600, rel=0.1
    )
