"""The PubMed fallback asks NCBI only with the contact e-mail NCBI asks for (issue 48)."""

from langgraph.runtime import Runtime

from graphs.describe import progress_line
from graphs.runtime import pubmed_client
from nodes.fallback_search import fallback_search


def with_fallback(settings, **values):
    return settings.model_copy(update={"fallback": settings.fallback.model_copy(update=values)})


def test_no_client_without_an_email_and_one_with_it(settings):
    assert pubmed_client(with_fallback(settings, enabled=True, email=None)) is None
    client = pubmed_client(with_fallback(settings, enabled=True, email="me@example.org"))
    assert client is not None and client.email == "me@example.org" and client.tool == "quorum"
    assert pubmed_client(with_fallback(settings, enabled=False, email="me@example.org")) is None


async def test_without_an_email_the_trace_says_pubmed_was_not_asked(make_context, settings):
    from tests.support.fakes import script

    chosen = with_fallback(settings, enabled=True, email=None)
    ctx = make_context(script(), settings_=chosen)
    ctx.pubmed = None
    state = {"question": "Is aspirin effective?", "query": "aspirin"}
    update = await fallback_search(state, Runtime(context=ctx))
    (round_,) = update["fallbacks"]
    assert round_["status"].startswith("fallback off: no contact e-mail (set fallback.email")
    assert progress_line("fallback_search", update) == (
        "– PubMed not asked: no contact e-mail set (fallback.email)"
    )
