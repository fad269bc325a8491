"""PubMed access: the E-utilities client for fallback search and the PubmedArticle parser."""

from infra.pubmed.eutils import FallbackUnavailable, PubMedClient
from infra.pubmed.xml import iter_pubmed_articles, parse_pubmed_article

__all__ = ["FallbackUnavailable", "PubMedClient", "iter_pubmed_articles", "parse_pubmed_article"]
