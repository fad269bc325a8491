"""Chat models behind one small interface: local Hugging Face or any OpenAI-compatible endpoint.

providers.py: what differs by provider, one registry (PROVIDERS); chat.py: a configured model
and its calls; pool.py: the models by role, built once.
"""

from infra.likelihood import LikelihoodUnavailable
from infra.models.chat import UNPARSEABLE, ChatModel
from infra.models.pool import ModelPool, endpoint_limit
from infra.models.providers import PROVIDERS, Provider, make_chat_model, provider_for

__all__ = [
    "PROVIDERS",
    "UNPARSEABLE",
    "ChatModel",
    "LikelihoodUnavailable",
    "ModelPool",
    "Provider",
    "endpoint_limit",
    "make_chat_model",
    "provider_for",
]
