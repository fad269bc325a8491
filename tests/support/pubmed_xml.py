"""PubMed XML as NCBI's baseline and update files hold it: articles, deletions, gzipped sets."""

from __future__ import annotations

import gzip
from collections.abc import Sequence


def article(pmid: str, title: str, abstract: str = "An abstract.", mesh: Sequence[str] = ()) -> str:
    """One <PubmedArticle> of journal "J Test", 2024, with these MeSH descriptors."""
    headings = "".join(
        f"<MeshHeading><DescriptorName>{m}</DescriptorName></MeshHeading>" for m in mesh
    )
    return (
        f"<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article>"
        f"<Journal><Title>J Test</Title><JournalIssue><PubDate><Year>2024</Year></PubDate>"
        f"</JournalIssue></Journal><ArticleTitle>{title}</ArticleTitle>"
        f"<Abstract><AbstractText>{abstract}</AbstractText></Abstract></Article>"
        + (f"<MeshHeadingList>{headings}</MeshHeadingList>" if mesh else "")
        + "</MedlineCitation></PubmedArticle>"
    )


def pubmed_set(articles: Sequence[str], deleted: Sequence[str] = ()) -> bytes:
    """A gzipped <PubmedArticleSet> of these articles, then a <DeleteCitation> of `deleted`."""
    deletes = (
        "<DeleteCitation>" + "".join(f"<PMID>{p}</PMID>" for p in deleted) + "</DeleteCitation>"
        if deleted
        else ""
    )
    xml = (
        f'<?xml version="1.0"?>\n<PubmedArticleSet>{"".join(articles)}{deletes}</PubmedArticleSet>'
    )
    return gzip.compress(xml.encode())
