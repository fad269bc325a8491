"""Settings: one object, read once, from QUORUM_* environment variables and an optional file.

The groups live by job in this package's modules (models, retrieval, methods); `Settings`
holds one of each, and every name is importable from `infra.settings`.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, get_args

from platformdirs import user_data_dir
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from infra.errors import UserError
from infra.settings.group import Group
from infra.settings.methods import (
    CCVSettings,
    CoBagSettings,
    EnsembleSettings,
    FallbackSettings,
    MoISettings,
    OrganizeSettings,
    SynthesisSettings,
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
    fallback: FallbackSettings = Field(default_factory=FallbackSettings)

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


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning validation errors into one readable line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"invalid setting {where}: {message}") from None


def choices(group: type[BaseModel], name: str) -> tuple[str, ...]:
    """Return the names a Literal setting accepts, in their documented order."""
    return get_args(group.model_fields[name].annotation)


def secret_from_env(name: str | None) -> SecretStr | None:
    """Return the secret held by an environment variable, wrapped so it never prints."""
    if not name:
        return None
    value = os.environ.get(name)
    return SecretStr(value) if value else None
