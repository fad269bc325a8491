"""Parse NLM PubmedArticleSet XML (efetch output, baseline and update files) into plain dicts."""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from os import PathLike, fspath
from typing import IO

from infra.records import Document

_WHITESPACE = re.compile(r"\s+")
_FOUR_DIGITS = re.compile(r"\d{4}")


def _norm(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _text(elem: ET.Element | None) -> str:
    # itertext() keeps the text of inline markup such as <i>, <sup> and <b>.
    return _norm("".join(elem.itertext())) if elem is not None else ""


def _abstract(article: ET.Element | None, citation: ET.Element) -> str:
    texts = article.findall("Abstract/AbstractText") if article is not None else []
    # OtherAbstract: an abstract in another version (publisher's, plain-language); English only,
    # since the index analyses English.
    for other in citation.findall("OtherAbstract"):
        if (other.get("Language") or "eng").lower() == "eng":
            texts += other.findall("AbstractText")
    parts = []
    for part in texts:
        text = _text(part)
        label = _norm(part.get("Label") or "")
        if label:
            parts.append(f"{label}: {text}" if text else f"{label}:")
        elif text:
            parts.append(text)
    return " ".join(parts)


def _year(article: ET.Element | None) -> int | None:
    if article is None:
        return None
    pub_date = article.find("Journal/JournalIssue/PubDate")
    if pub_date is None:
        return None
    year = _text(pub_date.find("Year"))
    if year.isdigit():
        return int(year)
    match = _FOUR_DIGITS.search(_text(pub_date.find("MedlineDate")))
    return int(match.group()) if match else None


def _journal(citation: ET.Element, article: ET.Element | None) -> str:
    if article is not None:
        for path in ("Journal/Title", "Journal/ISOAbbreviation"):
            name = _text(article.find(path))
            if name:
                return name
    return _text(citation.find("MedlineJournalInfo/MedlineTA"))


def parse_pubmed_article(elem: ET.Element) -> Document | None:
    """Convert one ``<PubmedArticle>`` element into a plain dict, or None without a PMID.

    Returns:
        ``{"pmid", "title", "abstract", "year", "mesh", "journal"}``; ``abstract`` is ""
        when the article has none and ``year`` is None when no date can be read.
    """
    citation = elem.find("MedlineCitation")
    if citation is None:
        return None
    # Only MedlineCitation's own PMID: CommentsCorrections nest PMIDs of other articles.
    pmid = _text(citation.find("PMID"))
    if not pmid:
        return None
    article = citation.find("Article")
    return {
        "pmid": pmid,
        "title": _text(article.find("ArticleTitle")) if article is not None else "",
        "abstract": _abstract(article, citation),
        "year": _year(article),
        "mesh": [
            name
            for name in map(_text, citation.findall("MeshHeadingList/MeshHeading/DescriptorName"))
            if name
        ],
        "journal": _journal(citation, article),
    }


def _open(source: str | PathLike[str] | IO[bytes], stack: ExitStack) -> tuple[IO[bytes], str]:
    if hasattr(source, "read"):
        return source, str(getattr(source, "name", "<stream>"))
    path = fspath(source)
    # Baseline and update files are distributed as .xml.gz.
    opener = gzip.open if path.endswith(".gz") else open
    return stack.enter_context(opener(path, "rb")), path


def iter_pubmed_articles(
    source: str | PathLike[str] | IO[bytes],
) -> Iterator[tuple[str, Document | str]]:
    """Stream a PubmedArticleSet: ``("article", doc)``, ``("delete", pmid)``, ``("skip", why)``.

    Memory stays constant: every finished top-level record is cleared from the tree.
    Paths ending in ``.gz`` are decompressed on the fly.

    Args:
        source: A path or a binary file object holding PubmedArticleSet XML.

    Raises:
        ValueError: If the XML is malformed (the message names the problem and line) or a
            gzip file is corrupt or truncated.
    """
    with ExitStack() as stack:
        stream, name = _open(source, stack)
        root: ET.Element | None = None
        depth = 0
        articles = 0
        try:
            for event, elem in ET.iterparse(stream, events=("start", "end")):
                if event == "start":
                    root = elem if root is None else root
                    depth += 1
                    continue
                depth -= 1
                if elem.tag == "PubmedArticle":
                    articles += 1
                    doc = parse_pubmed_article(elem)
                    if doc is not None:
                        yield "article", doc
                    else:
                        yield "skip", f"{name}: PubmedArticle #{articles} has no PMID"
                    elem.clear()
                elif elem.tag == "DeleteCitation":
                    for pmid in map(_text, elem.iter("PMID")):
                        if pmid:
                            yield "delete", pmid
                    elem.clear()
                if depth == 1 and root is not None:
                    root.clear()
        except ET.ParseError as err:
            raise ValueError(f"malformed PubMed XML in {name}: {err}") from err
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise ValueError(f"corrupt gzip file {name}: {err}") from err
