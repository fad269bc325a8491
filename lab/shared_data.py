"""Where the maintainers' data lies: ../shared/data, beside the checkout (a user's clone has none).

One place for the path, so that moving a module within the lab cannot move the data away from
it: the faults drill and the scale bench each counted their own parents, and after the lab's
move both pointed at /shared.
"""

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
SHARED_DATA = CHECKOUT.parent / "shared" / "data"
BIOASQ_GOLDEN = SHARED_DATA / "bioasq"
CORPUS = SHARED_DATA / "corpus" / "pubmed_docs.jsonl.gz"
