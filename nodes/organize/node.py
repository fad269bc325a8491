"""organize: the strategy named by `organize.strategy` relates, groups or prunes the contexts.

"auto" (the default) runs corg for an OpenAI-compatible organize model and dedupe for a local
one; the first note of the update says which ran and why (the trace shows it).

A strategy that forms groups of contexts (corg and the CORG paper's baselines) writes them.
The baselines, and corg with organize.corg_answers "organize", answer them too, and the node
then writes `decision`: the aggregate of the group answers (aggregate.py), which the ensemble
node keeps. corg with "ensemble" (the default) leaves them to the ensemble node, whose
strategy answers each group and whose aggregate, by the same aggregator, is the decision.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from nodes.context import Context
from nodes.descriptions.organize import CHOSEN
from nodes.organize.aggregate import aggregate, answered
from nodes.organize.strategies import chosen_strategy
from nodes.state import Organized, QAState


async def organize(state: QAState, runtime: Runtime[Context]) -> Organized:
    """Organize the top contexts with the strategy organize.strategy names or "auto" chooses."""
    ctx = runtime.context
    strategy, why = chosen_strategy(ctx.settings)
    chosen = f"{CHOSEN}{strategy.name} ({why})"
    contexts = list(state.get("contexts", []))[: ctx.settings.organize.top_k]
    if len(contexts) < 2:
        # No groups this round: an earlier round's must not stand in for the ensemble's vote.
        update: Organized = {"organized": contexts, "relations": [], "notes": [chosen]}
        return update | {"groups": []} if strategy.forms_groups else update
    model = ctx.models.first("organize")
    qtype = state.get("qtype") or "summary"
    update = await strategy.organize(ctx, state["question"], contexts, model, qtype)
    update["notes"] = [chosen, *(update.get("notes") or [])]
    groups = update.get("groups") or []
    if any(answered(g) for g in groups):
        update["decision"] = aggregate(
            groups, qtype, strategy=strategy.name, settings=strategy.settings(ctx, model)
        )
    return update
