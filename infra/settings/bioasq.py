"""Settings of BioASQ submissions: what a submission holds where quorum has no answer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.settings.group import Group


class BioasqSettings(Group):
    """BioASQ submissions (`quorum bioasq run`)."""

    unanswered_yesno: Literal["yes", "no"] = Field(
        "yes",
        description="The exact answer written into a submission for a yes/no question quorum "
        "could not answer (a submission must hold one); BioASQ's majority class, 'yes' for 64% "
        "of the golden yes/no questions of 7B-11B (docs/bioasq.md). The journal marks such a "
        "question guessed; ask, chat and the page never guess.",
    )
