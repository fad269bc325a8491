"""PubMed document URLs in BioASQ files: every form read, one form written.

BioASQ golden files name documents as `http://www.ncbi.nlm.nih.gov/pubmed/N`; recent ones also
use PubMed's current form, `https://pubmed.ncbi.nlm.nih.gov/N/`. Every reader takes both (http or
https, with or without `www.` and a trailing slash); every writer uses `pubmed_url`.
"""

from __future__ import annotations

import re

PUBMED_URL = re.compile(
    r"(?:https?://)?(?:www\.)?(?:ncbi\.nlm\.nih\.gov/pubmed|pubmed\.ncbi\.nlm\.nih\.gov)/(\d+)/?",
    re.I,
)
"""Any PubMed article URL; group 1 is the PMID."""
_TRAILING_PMID = re.compile(r"(\d+)/?$")


def pubmed_url(pmid: str) -> str:
    """Return the URL a submission names a document by.

    NOTE: the form of BioASQ's submission guidelines and of every golden file of editions 7–11;
    the organizers' evaluator compares document URLs as whole strings, so this is the one place
    that decides it.
    """
    return f"http://www.ncbi.nlm.nih.gov/pubmed/{pmid}"


def pmid_of(url_or_pmid: str) -> str:
    """Return the PMID of any PubMed URL form (or of a bare PMID)."""
    text = str(url_or_pmid).strip()
    match = PUBMED_URL.fullmatch(text) or _TRAILING_PMID.search(text)
    if not match:
        raise ValueError(f"no PMID in {url_or_pmid!r}")
    return match.group(1)


def canonical_url(value: str) -> str:
    """Return a PubMed URL in the written form; anything else unchanged."""
    match = PUBMED_URL.fullmatch(str(value).strip())
    return pubmed_url(match.group(1)) if match else value


def written_form_problem(value: str) -> str | None:
    """Say how `value` departs from the form submissions write (`pubmed_url`); None when it is it.

    Names the departure a writer can fix: a bare PMID, PubMed's current URL, https, a trailing
    slash, other spelling, or no PubMed URL at all.
    """
    loose = PUBMED_URL.fullmatch(value.strip())
    if loose and value == pubmed_url(loose.group(1)):
        return None
    if value.strip().isdigit():
        return f"bare PMID {value!r}; write {pubmed_url(value.strip())!r}"
    if not loose:
        return f"{value!r} is not a PubMed URL of the form '{pubmed_url('<PMID>')}'"
    written = pubmed_url(loose.group(1))
    if "pubmed.ncbi" in value.lower():
        return f"{value!r} is PubMed's current URL form; submissions write {written!r}"
    if value.lower().startswith("https"):
        return f"{value!r} uses https; write {written!r}"
    if value.rstrip().endswith("/"):
        return f"{value!r} has a trailing '/'; write {written!r}"
    return f"{value!r} is not exactly {written!r}"
