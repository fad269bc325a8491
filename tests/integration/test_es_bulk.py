"""Elasticsearch bulk loads against the real node: load settings, parallel bulk, vectors later."""

from collections import Counter

import numpy as np
import pytest

from infra.ingest.embed_job import EmbedJournal, embed_missing
from infra.search.elastic import ElasticIndex
from infra.search.elastic_bulk import BULK_KEY
from tests.support.counting import CountingEmbedder, Planted
from tests.support.fakes import HashEmbedder


def docs(n, word="aspirin"):
    return [
        {"pmid": str(7000 + i), "title": f"title {i}", "abstract": f"{word} trial {i}"}
        for i in range(n)
    ]


def text(doc):
    return f"{doc['title']}. {doc['abstract']}"


def settings_of(admin, name):
    found = admin.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
    return found.get("index.refresh_interval"), found["index.number_of_replicas"]


def meta_of(admin, name):
    return admin.indices.get_mapping(index=name)[name]["mappings"].get("_meta", {})


def writer(es_url, name, **kw):
    """Open the index as `open_writer` does: a bulk load until close."""
    index = ElasticIndex(es_url, name, create=True, **kw)
    index.begin_bulk()
    return index


def test_a_bulk_load_turns_replicas_and_refresh_off_and_puts_them_back(es_url, new_name, admin):
    name = new_name()
    ElasticIndex(es_url, name, create=True, shards=2, replicas=1).close()
    assert settings_of(admin, name) == (None, "1")
    assert (
        admin.indices.get_settings(index=name)[name]["settings"]["index"]["number_of_shards"] == "2"
    )
    load = writer(es_url, name)
    assert settings_of(admin, name) == ("-1", "0")
    load.upsert(docs(10), None)
    load.commit()  # durable, not refreshed: the load's documents show when it ends
    assert admin.count(index=name)["count"] == 0
    killed = writer(es_url, name)  # a second load while the first one never ended
    killed._client.close()  # ... and is killed: nothing puts the settings back
    assert settings_of(admin, name) == ("-1", "0")
    writer(es_url, name).close()  # the next load restores what the index had before either
    assert settings_of(admin, name) == (None, "1")
    assert BULK_KEY not in meta_of(admin, name)
    assert admin.count(index=name)["count"] == 10


def test_parallel_bulk_keeps_the_last_version_of_a_repeated_pmid(es_url, new_name):
    name = new_name()
    load = writer(es_url, name, bulk_threads=3, bulk_docs=50)
    batch = docs(600)
    batch.append({**batch[0], "abstract": "statin revised"})
    assert load.upsert(batch, None) == 600
    load.close()
    index = ElasticIndex(es_url, name)
    assert index.count() == 600
    assert index.fetch(["7000"])[0]["abstract"] == "statin revised"
    assert [p for p, _ in index.search("statin", 10).hits] == ["7000"]


def run(es_url, name, embedder, **kw):
    load = writer(es_url, name, bulk_threads=2, bulk_docs=20)
    journal = EmbedJournal(kw.pop("journal"), embedder.name)
    try:
        return embed_missing(load, embedder, journal, **kw)
    finally:
        load.close()


def test_embed_resumes_after_a_crash_and_embeds_each_document_once(es_url, new_name, tmp_path):
    name = new_name()
    plain = ElasticIndex(es_url, name, create=True)
    corpus = docs(120)
    plain.upsert(corpus, None)
    plain.close()
    journal = tmp_path / "embed.json"
    first = CountingEmbedder(fail_on_call=4)
    with pytest.raises(Planted):
        run(es_url, name, first, journal=journal, batch_size=25, commit_every=25)
    assert sum(first.seen.values()) == 75
    second = CountingEmbedder()
    report = run(es_url, name, second, journal=journal, batch_size=25, commit_every=25)
    assert report.embedded == 45 and report.earlier == 75
    assert first.seen + second.seen == Counter(text(d) for d in corpus)
    index = ElasticIndex(es_url, name)
    assert index.dims == 64 and index.count_unembedded() == 0
    wanted = HashEmbedder().embed_documents([text(d) for d in corpus[:3]])
    scores = index.similarities([d["pmid"] for d in corpus[:3]], wanted[0])
    assert scores[0] == pytest.approx(1.0, abs=1e-4) and scores[1] < 0.99
    third = CountingEmbedder()
    assert run(es_url, name, third, journal=journal).embedded == 0 and third.calls == 0


def test_vector_storage_is_the_configured_index_type(es_url, new_name, admin):
    name = new_name()
    index = ElasticIndex(
        es_url, name, dims=64, create=True, vector_index="int8_flat", embedding_model="hash-64"
    )
    mapping = admin.indices.get_mapping(index=name)[name]["mappings"]
    assert mapping["properties"]["embedding"]["index_options"]["type"] == "int8_flat"
    assert mapping["_meta"]["quorum_embedding_model"] == "hash-64"
    vectors = HashEmbedder().embed_documents([text(d) for d in docs(5)])
    index.upsert(docs(5), vectors)
    index.commit()
    scores = index.similarities([d["pmid"] for d in docs(5)], vectors[2])
    assert int(np.argmax(scores)) == 2 and scores[2] == pytest.approx(1.0, abs=0.02)
    index.start_vectors(64, "another-model")  # computed beside: searches keep hash-64's
    mapping = admin.indices.get_mapping(index=name)[name]["mappings"]
    assert mapping["properties"]["embedding_2"]["index_options"]["type"] == "int8_flat"
    assert mapping["_meta"]["quorum_embedding_model"] == "hash-64"
    assert mapping["_meta"]["quorum_reembed"]["model"] == "another-model"


class Wide(CountingEmbedder):
    """Another model: 32 dimensions, another name (vectors the index held before)."""

    name, dim = "wide-32", 32


def test_another_models_vectors_fill_a_field_of_their_own_and_take_over(
    es_url, new_name, tmp_path, admin
):
    name = new_name()
    corpus = docs(60)
    old = ElasticIndex(es_url, name, dims=32, create=True, embedding_model="wide-32")
    old.upsert(corpus, Wide().embed_documents([text(d) for d in corpus]))
    old.close()
    journal = tmp_path / "embed.json"
    first = CountingEmbedder(fail_on_call=2)
    with pytest.raises(Planted):
        run(es_url, name, first, journal=journal, batch_size=25, commit_every=25)
    index = ElasticIndex(es_url, name)  # killed half way: searches still use wide-32's vectors
    assert index.dims == 32 and meta_of(admin, name)["quorum_embedding_model"] == "wide-32"
    query = Wide().embed_documents([text(corpus[5])])[0]
    assert index.similarities([corpus[5]["pmid"]], query)[0] == pytest.approx(1.0, abs=1e-4)
    second = CountingEmbedder()
    report = run(es_url, name, second, journal=journal, batch_size=25, commit_every=25)
    assert report.embedded == 35 and first.seen + second.seen == Counter(text(d) for d in corpus)
    meta = meta_of(admin, name)
    assert meta["quorum_embedding_model"] == "hash-64" and "quorum_reembed" not in meta
    assert meta["quorum_vector_field"] == "embedding_2"
    index = ElasticIndex(es_url, name)
    assert index.dims == 64 and index.count_unembedded() == 0
    query = HashEmbedder().embed_query(text(corpus[7]))
    best = index.nearest(query, 1)[0]
    assert best[1] == pytest.approx(1.0, abs=1e-4)
    assert index.similarities([corpus[7]["pmid"]], query)[0] == pytest.approx(1.0, abs=1e-4)
    late = {"pmid": "9999", "title": "late", "abstract": "statin trial"}
    index.upsert([late], HashEmbedder().embed_documents([text(late)]))  # into the new field
    index.commit()
    assert index.similarities(["9999"], HashEmbedder().embed_query(text(late)))[0] > 0.99
    assert run(es_url, name, CountingEmbedder(), journal=journal).embedded == 0
