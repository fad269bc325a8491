"""How a node says what it is doing and what it did: one description per node, found by name.

Each node's description is its own module, named as the node, in nodes/descriptions/
(`describes(...)` there): the label shown while it runs, the few words when it finishes (the
same on the CLI, in chat and on the page), the parts of its one-line summary, and what its
update shows in a trace (`nodes.trace_view` blocks, which the text and the HTML views both
render). A description reads the update alone, so showing a run never loads the node itself.
graphs/describe.py reads them from DESCRIPTIONS and holds no node-by-node chain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from nodes.records import Answer, Result
from nodes.trace_view import Block

Update = dict[str, Any]
Outcome = Literal["done", "failed", "skipped"]
"""How a finished step went: it did its job, it failed (something stood in), or it was skipped."""
MARKS: dict[str, str] = {"done": "✓", "failed": "✗", "skipped": "–"}
"""The mark before a finished step's words: never ✓ for a step that failed or was skipped."""


def _nothing(update: Update) -> list[Any]:
    return []


def _done(update: Update) -> Outcome:
    return "done"


@dataclass(frozen=True)
class NodeDescription:
    """What one node says about itself."""

    label: str
    """What the node is doing while it runs ("searching", "ensemble answering")."""
    done: Callable[[Update], str]
    """A few words on what its update says once it finished ("searched: 1,204 hits")."""
    summary: Callable[[Update], list[str]] = field(default=_nothing)
    """The parts of its one-line summary (the page's progress list), none when nothing to add."""
    trace: Callable[[Update], list[Block]] = field(default=_nothing)
    """What its update shows in a trace, as blocks (none: the update is shown as it is)."""
    covers: frozenset[str] = frozenset()
    """The update's keys the trace's blocks show, which the views then leave out of the rest."""
    outcome: Callable[[Update], Outcome] = field(default=_done)
    """How its step went, for its mark: done, failed (something stood in), or skipped."""


DESCRIPTIONS: dict[str, NodeDescription] = {}
"""Every node's description by its name in the graph."""


def describes(node: str, description: NodeDescription) -> None:
    """Register `node`'s description (once: a second one for the same name is a bug)."""
    if node in DESCRIPTIONS:
        raise ValueError(f"node {node!r} is described twice")
    DESCRIPTIONS[node] = description


def plural(count: int, word: str, many: str | None = None) -> str:
    """Return "1 hit", "2 hits", "1,204 hits": the count and the word in the right number."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def confidence_text(result: Result | Answer) -> str:
    """Return the reported confidence, saying whose it is when the model's differs.

    "0.40 from the evidence (model said 0.95)" once the result carries the synthesizer's own
    word beside the confidence earned from the evidence; "0.90" for an older result.
    """
    confidence = float(result.get("confidence") or 0.0)
    model = result.get("model_confidence")
    if model is None:
        return f"{confidence:.2f}"
    return f"{confidence:.2f} from the evidence (model said {float(model):.2f})"
