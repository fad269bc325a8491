"""dedupe: find duplicate contexts in one model call and keep one of each."""

from __future__ import annotations

import asyncio
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from infra.embeddings import document_text
from infra.models import ChatModel
from nodes.context import Context
from nodes.organize.strategies.registry import OrganizeStrategy, register
from nodes.passages import passages
from nodes.state import Organized, Passage, Relation
from prompts import render

# Duplicates show in a passage's opening; the organizer needs no more of it.
ORGANIZE_CHARS = 400
# A claimed duplicate must also be close in embedding space; a small model's over-eager
# labels must not delete evidence.
MIN_DUPLICATE_COSINE = 0.85


MAX_DUPLICATES = 3


def duplicates_schema(n: int) -> type[BaseModel]:
    """Return the organizer's output for n passages: at most a few (later, earlier) pairs."""
    number = Literal[tuple(range(1, n + 1))]
    pair = create_model(
        "Duplicate",
        index=(number, Field(description="Number of the later passage")),
        same_as=(number, Field(description="Number of the earlier passage it repeats")),
    )
    return create_model(
        "Duplicates",
        duplicates=(list[pair], Field(default_factory=list, max_length=MAX_DUPLICATES)),
    )


@register("dedupe")
class Dedupe(OrganizeStrategy):
    """Label duplicated contexts, verify each label, and drop the later copy."""

    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return the contexts without verified duplicates, and every label with its cosine."""
        messages = render(
            "organize",
            question=question,
            contexts=passages(contexts, min(model.context_chars, ORGANIZE_CHARS)),
        )
        texts = [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
        # The contexts are embedded in a thread while the model is asked: in a batch, CPU work
        # on the event loop would hold up every other question's calls.
        reply, vectors = await asyncio.gather(
            model.structured(duplicates_schema(len(contexts)), messages),
            asyncio.to_thread(ctx.embedder.embed_documents, texts),
        )
        relations: list[Relation] = []
        dropped: set[int] = set()
        for dup in reply.value.duplicates if reply.value else []:
            later, earlier = dup.index - 1, dup.same_as - 1
            if not (0 <= earlier < later < len(contexts)):
                continue
            similarity = float(np.dot(vectors[later], vectors[earlier]))
            applied = similarity >= MIN_DUPLICATE_COSINE and earlier not in dropped
            relations.append(
                {
                    "a": contexts[earlier]["pmid"],
                    "b": contexts[later]["pmid"],
                    "label": "duplicated",
                    "cosine": round(similarity, 3),
                    "applied": applied,
                }
            )
            if applied:
                dropped.add(later)
        organized = [c for i, c in enumerate(contexts) if i not in dropped]
        notes = [f"organize: dropped {len(dropped)} duplicate context(s)"] if dropped else []
        return {
            "organized": organized,
            "relations": relations,
            "calls": [reply.record("organize")],
            "notes": notes,
        }
