"""Keep Hugging Face libraries offline and quiet: weights come from installed packages only."""

import logging
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", module="transformers")
warnings.filterwarnings("ignore", module="sentence_transformers")
logging.getLogger("httpx").setLevel(logging.WARNING)


def quiet_transformers() -> None:
    """Silence transformers' progress bars and advisory logging (after it is imported)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
