"""Errors name the next step: the server that is down, the index that is missing, the name rule."""

import pytest

from infra.errors import Unavailable
from infra.search.backends import open_backend
from infra.search.corpus import IndexMissing
from infra.search.elastic import ElasticIndex
from infra.search.embedded import EmbeddedIndex
from infra.settings import SettingsError, load_settings
from tests.support.data import DOCS


def test_an_elasticsearch_that_cannot_be_reached_is_named_with_how_to_start_one():
    # Port 9 on loopback: nothing listens there, so the connection is refused at once.
    with pytest.raises(Unavailable) as caught:
        ElasticIndex("http://127.0.0.1:9", "x").check_reachable()
    message = str(caught.value)
    assert "http://127.0.0.1:9" in message and "Connection refused" in message
    assert "python -m lab.elasticsearch_server start" in message
    assert "QUORUM_SEARCH__ELASTICSEARCH_URL" in message


def test_a_missing_index_lists_those_that_exist_and_how_to_build_it(settings):
    other = load_settings(
        home=settings.home, search={**settings.search.model_dump(), "index": "missing"}
    )
    EmbeddedIndex.build(other.index_dir.parent / "known", DOCS)
    (other.index_dir.parent / "t").mkdir(parents=True, exist_ok=True)  # no index: not listed
    with pytest.raises(IndexMissing) as caught:
        open_backend(other, None)
    message = str(caught.value)
    assert message.startswith("index 'missing' does not exist (existing: known)")
    assert "quorum index FILE... --index missing" in message


@pytest.mark.parametrize("name", ["Bad Name", "../etc", "_x", "a" * 65])
def test_an_invalid_index_name_gives_the_rule_in_words(name):
    with pytest.raises(SettingsError) as caught:
        load_settings(search={"index": name})
    assert "lowercase letters, digits, '-' and '_'" in str(caught.value)
    assert "pattern" not in str(caught.value) and "Value error" not in str(caught.value)
