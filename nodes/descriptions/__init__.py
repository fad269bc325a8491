"""Every node's description (nodes/describing.py), one module per node, named as the node.

Importing this package registers them all. A description reads the node's update and nothing
else, so what shows a run — `trace show`, chat's /trace, the page, the HTML export — loads
these and none of the nodes' own machinery (models, engines, numpy).
"""

from nodes.descriptions import (
    ensemble,
    fallback_search,
    finalize,
    generate_query,
    given_evidence,
    organize,
    refine_query,
    rerank,
    search,
    synthesize,
)

__all__ = [
    "ensemble",
    "fallback_search",
    "finalize",
    "generate_query",
    "given_evidence",
    "organize",
    "refine_query",
    "rerank",
    "search",
    "synthesize",
]
