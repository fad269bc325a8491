"""How refine_query is described: the relaxed query, read as generate_query's record."""

from __future__ import annotations

from nodes.describing import NodeDescription, describes
from nodes.descriptions.generate_query import query_trace

describes(
    "refine_query",
    NodeDescription(
        "relaxing the query",
        done=lambda update: "query relaxed",
        summary=lambda update: [f"query: {update['query']}"] if update.get("query") else [],
        trace=query_trace,  # the same record as generate_query's: proposals, verdicts, the one used
        covers=frozenset({"queries", "query"}),
    ),
)
