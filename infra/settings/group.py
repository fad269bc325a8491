"""The base every settings group derives from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Group(BaseModel):
    """Base for settings groups: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")
