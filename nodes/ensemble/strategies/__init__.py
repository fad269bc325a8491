"""Answer-ensemble strategies as pure arithmetic: Context Bagging, citation voting, MoI.

No model calls and no I/O: the ensemble node gathers relevance scores, member answers and
likelihoods, and these functions turn them into views, a winner, or a reordering.
"""

from nodes.ensemble.strategies.ccv import CitedAnswer, ccv_select
from nodes.ensemble.strategies.cobag import cobag_views, mean_relevance
from nodes.ensemble.strategies.moi import MoIFit, moi_permutations, moi_solve

__all__ = [
    "CitedAnswer",
    "MoIFit",
    "ccv_select",
    "cobag_views",
    "mean_relevance",
    "moi_permutations",
    "moi_solve",
]
