"""Settings: one object, read once, from QUORUM_* environment variables and an optional file.

The groups live by job in this package's modules (models, retrieval, methods, bioasq); `Settings`
holds one of each, and every name is importable from `infra.settings`.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, get_args

from platformdirs import user_data_dir
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError

from infra.errors import UserError
from infra.settings.bioasq import BioasqSettings
from infra.settings.group import Group
from infra.settings.methods import (
    CCVSettings,
    CoBagSettings,
    EnsembleSettings,
    FallbackSettings,
    MoISettings,
    OrganizeSettings,
    SynthesisSettings,
    VerifySettings,
)
from infra.settings.models import MODEL_ROLES, ModelSettings, ModelSpec
from infra.settings.retrieval import (
    INDEX_NAME,
    INDEX_NAME_RULE,
    CrossEncoderSettings,
    EmbeddingSettings,
    RerankSettings,
    SearchSettings,
    SnippetSettings,
)

__all__ = [
    "INDEX_NAME",
    "INDEX_NAME_RULE",
    "MODEL_ROLES",
    "BioasqSettings",
    "CCVSettings",
    "CoBagSettings",
    "CrossEncoderSettings",
    "EmbeddingSettings",
    "EnsembleSettings",
    "FallbackSettings",
    "Group",
    "MoISettings",
    "ModelSettings",
    "ModelSpec",
    "OrganizeSettings",
    "RerankSettings",
    "SearchSettings",
    "Settings",
    "SettingsError",
    "SnippetSettings",
    "SynthesisSettings",
    "VerifySettings",
    "choices",
    "load_settings",
    "read_config_file",
    "secret_from_env",
]


class Settings(BaseSettings):
    """Everything quorum can be told; every field has a QUORUM_* variable (nested with __)."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    home: Path = Field(
        default_factory=lambda: Path(user_data_dir("quorum")),
        description="Data directory: indexes, model caches, checkpoints (QUORUM_HOME).",
    )
    config: Path | None = Field(
        None, description="Optional TOML or JSON settings file (QUORUM_CONFIG)."
    )
    models: ModelSettings = Field(default_factory=ModelSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    snippets: SnippetSettings = Field(default_factory=SnippetSettings)
    organize: OrganizeSettings = Field(default_factory=OrganizeSettings)
    ensemble: EnsembleSettings = Field(default_factory=EnsembleSettings)
    synthesis: SynthesisSettings = Field(default_factory=SynthesisSettings)
    verify: VerifySettings = Field(default_factory=VerifySettings)
    fallback: FallbackSettings = Field(default_factory=FallbackSettings)
    bioasq: BioasqSettings = Field(default_factory=BioasqSettings)
    presets: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Named sets of settings chosen with `--preset NAME` (as PaperQA2's named "
        "settings): each a table of groups, e.g. [presets.qwen.models] in the config file.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Read init values, then the environment, then the config file."""
        return init_settings, env_settings, _ConfigFileSource(settings_cls)

    @property
    def llm_cache_path(self) -> Path:
        """Return the SQLite file of the LLM response cache."""
        return self.home / "cache" / "llm.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """Return the SQLite file holding every run's checkpoints."""
        return self.home / "checkpoints.sqlite"

    @property
    def index_dir(self) -> Path:
        """Return the directory of the configured embedded index."""
        return self.home / "indexes" / self.search.index


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Settings from the file named by QUORUM_CONFIG (TOML or JSON)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("QUORUM_CONFIG")
        if not path:
            return {}
        return read_config_file(Path(path))


class SettingsError(UserError):
    """A settings problem, phrased for a one-line error message."""


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML or JSON config file into a dict."""
    if path.suffix not in (".toml", ".json"):
        raise SettingsError(f"config file {path} must be .toml or .json")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read config file {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(
            f"config file {path} is not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path} must hold a table/object at the top level")
    return data


NOT_SETTINGS = frozenset(
    {
        "QUORUM_DEBUG",
        "QUORUM_ES_DIR",
        "QUORUM_ES_PORT",
        "QUORUM_ES_USER",
        "QUORUM_ES_JAVA_HOME",
        "QUORUM_MODEL",
    }
)
"""QUORUM_* variables that are not settings (tracebacks, the test Elasticsearch node, and
QUORUM_MODEL: the CLI's --model BASE_URL#NAME, read by graphs/cli/common.model_options)."""


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning every problem into one line naming the setting or variable."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = [str(p) for p in first["loc"]]
        where = ".".join(path)
        variable = "QUORUM_" + "__".join(p.upper() for p in path)
        if first["type"] == "extra_forbidden":
            close = _did_you_mean(path)
            if variable in os.environ:
                hint = f"; did you mean QUORUM_{close.replace('.', '__').upper()}?" if close else ""
                raise SettingsError(
                    f"environment variable {variable} names no setting{hint} "
                    "(the settings: docs/configuration.md)"
                ) from None
            hint = f"; did you mean {close}?" if close else ""
            raise SettingsError(f"unknown setting {where}{hint}") from None
        message = str(first["msg"]).removeprefix("Value error, ")
        source = f" (from {variable})" if variable in os.environ else ""
        raise SettingsError(f"invalid setting {where}{source}: {message}") from None
    except PydanticSettingsError as exc:  # a variable whose value is not the JSON it must be
        raise SettingsError(_unparsed(exc)) from None
    _check_variables(settings)
    return settings


def _did_you_mean(path: list[str]) -> str:
    """Return the known dotted name closest to the path's last part ('' when none is)."""
    model: Any = Settings
    for part in path[:-1]:
        field = model.model_fields.get(part) if isinstance(model, type) else None
        model = field.annotation if field is not None else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ""
    close = difflib.get_close_matches(path[-1], list(model.model_fields), n=1, cutoff=0.6)
    return ".".join([*path[:-1], close[0]]) if close else ""


def _check_variables(settings: Settings) -> None:
    """Refuse a QUORUM_* variable that names no setting (a typo was silently ignored)."""
    secrets = {spec.api_key_env for _, spec in settings.models.by_role()}
    secrets.add(settings.fallback.api_key_env)
    for name in sorted(os.environ):
        if not name.startswith("QUORUM_") or name in NOT_SETTINGS or name in secrets:
            continue
        path = name.removeprefix("QUORUM_").lower().split("__")
        known, model = [], Settings
        for at, part in enumerate(path):
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                break
            if part not in model.model_fields:
                close = difflib.get_close_matches(part, list(model.model_fields), n=1, cutoff=0.6)
                if len(path) == 1 and not close:
                    break  # QUORUM_SOMETHING of another tool, or a key: not quorum's to judge
                hint = (
                    f"; did you mean QUORUM_"
                    f"{'__'.join(p.upper() for p in [*known, close[0], *path[at + 1 :]])}?"
                    if close
                    else ""
                )
                raise SettingsError(
                    f"environment variable {name} names no setting{hint} "
                    "(the settings: docs/configuration.md)"
                )
            known.append(part)
            model = model.model_fields[part].annotation


def _unparsed(exc: Exception) -> str:
    """Name the variable whose value could not be parsed as JSON, and why."""
    for name in sorted(os.environ):
        if not name.startswith("QUORUM_"):
            continue
        value = os.environ[name].strip()
        if value[:1] in "[{":
            try:
                json.loads(value)
            except json.JSONDecodeError as bad:
                return (
                    f"environment variable {name} is not valid JSON ({bad.msg} at column "
                    f"{bad.colno}); give a JSON object or list, e.g. "
                    f'{name}=\'{{"provider": "openai", "model": "m", "base_url": "http://…/v1"}}\''
                )
    return f"cannot read the settings from the environment: {exc}"


def choices(group: type[BaseModel], name: str) -> tuple[str, ...]:
    """Return the names a Literal setting accepts, in their documented order."""
    return get_args(group.model_fields[name].annotation)


def secret_from_env(name: str | None) -> SecretStr | None:
    """Return the secret held by an environment variable, wrapped so it never prints."""
    if not name:
        return None
    value = os.environ.get(name)
    return SecretStr(value) if value else None
