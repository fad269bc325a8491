"""Settings: defaults, QUORUM_* variables, config files, validation errors and secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from infra.settings import (
    ModelSettings,
    ModelSpec,
    Settings,
    SettingsError,
    load_settings,
    read_config_file,
    secret_from_env,
)

SECRET = "sk-test-QUORUM-SECRET-9876"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Start every test without QUORUM_* variables from the surrounding shell."""
    for name in list(os.environ):
        if name.startswith("QUORUM_"):
            monkeypatch.delenv(name)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- defaults ---------------------------------------------------------------------------------


def test_defaults():
    s = load_settings()
    assert s.search.backend == "embedded"
    assert s.search.index == "demo"
    assert s.search.max_candidates == 10_000
    assert s.rerank.top_k == 300
    assert s.ensemble.members == 5
    assert s.synthesis.min_confidence == 0.5
    assert s.config is None


def test_default_model_roles_share_the_local_model():
    s = load_settings()
    assert len(s.models.ensemble) == 1
    assert s.models.query.provider == "local"
    assert s.models.refine is None and s.models.synthesis is None


def test_settings_is_the_class_load_settings_builds():
    assert type(load_settings()) is Settings


def test_paths_derive_from_home(tmp_path):
    s = load_settings(home=tmp_path, search={"index": "pubmed"})
    assert s.checkpoint_path == tmp_path / "checkpoints.sqlite"
    assert s.index_dir == tmp_path / "indexes" / "pubmed"


# --- environment ------------------------------------------------------------------------------


def test_env_var_sets_a_top_level_field(monkeypatch, tmp_path):
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path))
    assert load_settings().home == tmp_path


def test_env_var_with_double_underscore_sets_a_nested_field(monkeypatch):
    monkeypatch.setenv("QUORUM_SEARCH__INDEX", "pubmed")
    monkeypatch.setenv("QUORUM_ENSEMBLE__MEMBERS", "5")
    monkeypatch.setenv("QUORUM_SYNTHESIS__MIN_CONFIDENCE", "0.8")
    s = load_settings()
    assert s.search.index == "pubmed"
    assert s.ensemble.members == 5
    assert s.synthesis.min_confidence == 0.8


def test_env_var_three_levels_deep(monkeypatch):
    monkeypatch.setenv("QUORUM_MODELS__QUERY__PROVIDER", "openai")
    monkeypatch.setenv("QUORUM_MODELS__QUERY__BASE_URL", "http://127.0.0.1:8000/v1")
    s = load_settings()
    assert s.models.query.provider == "openai"
    assert s.models.query.base_url == "http://127.0.0.1:8000/v1"


def test_env_var_holding_json_sets_a_list(monkeypatch):
    monkeypatch.setenv("QUORUM_MODELS__ENSEMBLE", '[{"model": "a"}, {"model": "b"}]')
    assert [m.model for m in load_settings().models.ensemble] == ["a", "b"]


def test_invalid_env_value_is_a_settings_error(monkeypatch):
    monkeypatch.setenv("QUORUM_SEARCH__MAX_CANDIDATES", "0")
    with pytest.raises(
        SettingsError,
        match=r"^invalid setting search\.max_candidates \(from QUORUM_SEARCH__MAX_CANDIDATES\): ",
    ):
        load_settings()


def test_unknown_nested_env_key_is_rejected(monkeypatch):
    monkeypatch.setenv("QUORUM_SEARCH__BOGUS", "1")
    with pytest.raises(SettingsError, match=r"^environment variable QUORUM_SEARCH__BOGUS names no"):
        load_settings()


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            {"search": {"backendd": "x"}},
            "unknown setting search.backendd; did you mean search.backend?",
        ),
        ({"ensembel": {}}, "unknown setting ensembel; did you mean ensemble?"),
    ],
)
def test_a_misspelt_setting_gets_did_you_mean(source, said):
    with pytest.raises(SettingsError) as caught:
        load_settings(**source)
    assert str(caught.value) == said


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("QUORUM_SEARCHH__BACKEND", "did you mean QUORUM_SEARCH__BACKEND?"),
        ("QUORUM_HOMEE", "did you mean QUORUM_HOME?"),
        ("QUORUM_ENSEMBLE__COBAG__MEMBRES", "did you mean QUORUM_ENSEMBLE__COBAG__MEMBERS?"),
    ],
)
def test_a_variable_that_names_no_setting_is_reported_not_ignored(monkeypatch, name, said):
    monkeypatch.setenv(name, "1")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"environment variable {name} names no setting; {said}")


def test_variables_that_are_not_settings_pass(monkeypatch):
    monkeypatch.setenv("QUORUM_DEBUG", "1")  # quorum's own, not a setting
    monkeypatch.setenv("QUORUM_OTHER_TOOL_TOKEN", "x")  # another tool's, far from any name
    monkeypatch.setenv("QUORUM_SEARCH_KEY", "s")  # named as a key by the settings
    spec = {"provider": "openai", "model": "m", "api_key_env": "QUORUM_SEARCH_KEY"}
    assert load_settings(models={"query": spec}).models.query.api_key_env == "QUORUM_SEARCH_KEY"


def test_a_variable_holding_broken_json_is_named(monkeypatch):
    monkeypatch.setenv("QUORUM_MODELS__ENSEMBLE", '[{"provider": "openai",}]')
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("environment variable QUORUM_MODELS__ENSEMBLE is not valid JSON (")
    assert "EnvSettingsSource" not in message


def test_init_overrides_win_over_env(monkeypatch):
    monkeypatch.setenv("QUORUM_SEARCH__INDEX", "fromenv")
    assert load_settings(search={"index": "frominit"}).search.index == "frominit"


# --- config files -----------------------------------------------------------------------------


def test_toml_config_file_via_quorum_config(monkeypatch, tmp_path):
    path = write(tmp_path / "quorum.toml", '[search]\nindex = "fromfile"\nmin_hits = 7\n')
    monkeypatch.setenv("QUORUM_CONFIG", str(path))
    s = load_settings()
    assert s.search.index == "fromfile"
    assert s.search.min_hits == 7
    assert s.config == path


def test_json_config_file_via_quorum_config(monkeypatch, tmp_path):
    data = {"rerank": {"top_k": 50, "fusion": "rrf"}, "ensemble": {"members": 4}}
    path = write(tmp_path / "quorum.json", json.dumps(data))
    monkeypatch.setenv("QUORUM_CONFIG", str(path))
    s = load_settings()
    assert (s.rerank.top_k, s.rerank.fusion, s.ensemble.members) == (50, "rrf", 4)


def test_env_overrides_the_config_file(monkeypatch, tmp_path):
    path = write(tmp_path / "quorum.toml", '[search]\nindex = "fromfile"\nmin_hits = 7\n')
    monkeypatch.setenv("QUORUM_CONFIG", str(path))
    monkeypatch.setenv("QUORUM_SEARCH__INDEX", "fromenv")
    s = load_settings()
    assert s.search.index == "fromenv"
    assert s.search.min_hits == 7


def test_unknown_top_level_key_in_file_is_rejected(monkeypatch, tmp_path):
    monkeypatch.setenv("QUORUM_CONFIG", str(write(tmp_path / "q.toml", "bogus = 1\n")))
    with pytest.raises(SettingsError, match=r"^unknown setting bogus$"):
        load_settings()


def test_unknown_key_in_a_nested_group_of_file_is_rejected(monkeypatch, tmp_path):
    path = write(tmp_path / "q.toml", "[search]\nbogus = 1\n")
    monkeypatch.setenv("QUORUM_CONFIG", str(path))
    with pytest.raises(SettingsError, match=r"^unknown setting search\.bogus$"):
        load_settings()


def test_unknown_key_in_a_model_spec_is_rejected(monkeypatch, tmp_path):
    path = write(tmp_path / "q.toml", '[models.query]\napi_key = "x"\n')
    monkeypatch.setenv("QUORUM_CONFIG", str(path))
    with pytest.raises(SettingsError, match=r"models\.query\.api_key"):
        load_settings()


def test_missing_config_file_is_a_settings_error(monkeypatch, tmp_path):
    monkeypatch.setenv("QUORUM_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsError, match="cannot read config file"):
        load_settings()


def test_settings_error_is_a_single_line_naming_the_field():
    with pytest.raises(SettingsError) as info:
        load_settings(rerank={"alpha": 3})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("invalid setting rerank.alpha: ")


def test_settings_error_is_a_value_error():
    assert issubclass(SettingsError, ValueError)


def test_empty_ensemble_is_rejected():
    with pytest.raises(SettingsError, match=r"models\.ensemble: .*at least one ensemble model"):
        load_settings(models={"ensemble": []})


def test_empty_ensemble_is_rejected_by_model_settings_itself():
    with pytest.raises(ValidationError):
        ModelSettings(ensemble=[])


def test_index_name_must_be_lowercase_slug():
    with pytest.raises(SettingsError, match=r"search\.index"):
        load_settings(search={"index": "Bad Name"})


# --- read_config_file -------------------------------------------------------------------------


def test_read_config_file_reads_toml_and_json(tmp_path):
    assert read_config_file(write(tmp_path / "a.toml", "[search]\nmin_hits = 3\n")) == {
        "search": {"min_hits": 3}
    }
    assert read_config_file(write(tmp_path / "a.json", '{"search": {"min_hits": 3}}')) == {
        "search": {"min_hits": 3}
    }


def test_read_config_file_of_a_missing_file(tmp_path):
    with pytest.raises(SettingsError, match=r"cannot read config file .*missing\.toml"):
        read_config_file(tmp_path / "missing.toml")


def test_read_config_file_of_a_directory(tmp_path):
    folder = tmp_path / "conf.toml"
    folder.mkdir()
    with pytest.raises(SettingsError, match="cannot read config file"):
        read_config_file(folder)


def test_read_config_file_of_non_utf8_bytes(tmp_path):
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SettingsError, match="cannot read config file"):
        read_config_file(path)


def test_read_config_file_of_invalid_toml(tmp_path):
    with pytest.raises(SettingsError, match="is not valid toml"):
        read_config_file(write(tmp_path / "bad.toml", "= ="))


def test_read_config_file_of_invalid_json(tmp_path):
    with pytest.raises(SettingsError, match="is not valid json"):
        read_config_file(write(tmp_path / "bad.json", "{bad"))


def test_read_config_file_needs_a_toml_or_json_suffix(tmp_path):
    for name in ("quorumrc", "quorum.yaml"):
        with pytest.raises(SettingsError, match=r"must be \.toml or \.json"):
            read_config_file(write(tmp_path / name, "a = 1\n"))


def test_read_config_file_requires_an_object_at_the_top(tmp_path):
    with pytest.raises(SettingsError, match="must hold a table/object at the top level"):
        read_config_file(write(tmp_path / "list.json", "[1, 2]"))


# --- model roles ------------------------------------------------------------------------------


@pytest.fixture
def models() -> ModelSettings:
    return ModelSettings(
        query=ModelSpec(model="q"), ensemble=[ModelSpec(model="e1"), ModelSpec(model="e2")]
    )


def test_refine_and_organize_default_to_the_query_model(models):
    assert models.for_role("refine") == [models.query]
    assert models.for_role("organize") == [models.query]


def test_synthesis_defaults_to_the_first_ensemble_model(models):
    assert [m.model for m in models.for_role("synthesis")] == ["e1"]


def test_ensemble_role_returns_every_ensemble_model(models):
    assert [m.model for m in models.for_role("ensemble")] == ["e1", "e2"]


def test_explicit_role_models_win_over_defaults():
    models = ModelSettings(
        refine=ModelSpec(model="r"), organize=ModelSpec(model="o"), synthesis=ModelSpec(model="s")
    )
    chosen = [models.for_role(role)[0].model for role in ("refine", "organize", "synthesis")]
    assert chosen == ["r", "o", "s"]


def test_unknown_role_is_a_key_error(models):
    with pytest.raises(KeyError, match="unknown model role 'judge'"):
        models.for_role("judge")


def test_model_key_identifies_provider_model_path_and_url():
    a = ModelSpec(provider="openai", model="m", base_url="http://x/v1")
    b = ModelSpec(provider="openai", model="m", base_url="http://y/v1")
    assert a.key != b.key
    assert a.key == ModelSpec(provider="openai", model="m", base_url="http://x/v1").key


# --- secrets ----------------------------------------------------------------------------------


def test_secret_from_env_wraps_the_value(monkeypatch):
    monkeypatch.setenv("QUORUM_TEST_KEY", SECRET)
    secret = secret_from_env("QUORUM_TEST_KEY")
    assert isinstance(secret, SecretStr)
    assert secret.get_secret_value() == SECRET
    assert SECRET not in repr(secret)
    assert SECRET not in str(secret)
    assert SECRET not in f"{secret}"


def test_secret_from_env_without_name_or_value_is_none(monkeypatch):
    monkeypatch.delenv("QUORUM_UNSET_KEY", raising=False)
    monkeypatch.setenv("QUORUM_EMPTY_KEY", "")
    assert secret_from_env(None) is None
    assert secret_from_env("") is None
    assert secret_from_env("QUORUM_UNSET_KEY") is None
    assert secret_from_env("QUORUM_EMPTY_KEY") is None


def test_settings_reference_api_keys_by_name_only(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    monkeypatch.setenv("MY_ES_KEY", SECRET)
    monkeypatch.setenv("QUORUM_MODELS__QUERY__PROVIDER", "openai")
    monkeypatch.setenv("QUORUM_MODELS__QUERY__API_KEY_ENV", "MY_LLM_KEY")
    monkeypatch.setenv("QUORUM_SEARCH__ELASTICSEARCH_API_KEY_ENV", "MY_ES_KEY")
    monkeypatch.setenv("QUORUM_FALLBACK__API_KEY_ENV", "MY_LLM_KEY")
    s = load_settings()
    assert s.models.query.api_key_env == "MY_LLM_KEY"
    for text in (repr(s), str(s), s.model_dump_json(), json.dumps(s.model_dump(mode="json"))):
        assert "MY_LLM_KEY" in text
        assert SECRET not in text


def test_model_spec_has_no_field_holding_a_key_value():
    names = set(ModelSpec.model_fields)
    assert "api_key_env" in names
    assert "api_key" not in names


def test_an_endpoint_is_an_http_url_or_a_bad_setting():
    # Issue 48: base_url = "file:///etc/passwd" was caught only by the endpoint check (exit 1).
    from infra.settings import ModelSpec

    for bad in ("file:///etc/passwd", "localhost:8080/v1", "http:///v1", "ftp://host/v1"):
        with pytest.raises(ValueError, match="not an http"):
            ModelSpec(provider="openai", model="m", base_url=bad)
    for good in ("http://127.0.0.1:8000/v1", "https://api.example.org/v1"):
        assert ModelSpec(provider="openai", model="m", base_url=good).base_url == good
