"""`.env.example` documents every setting under the name it is read from."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import Settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def _env_name(name: str) -> str:
    alias = Settings.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else f"COMPANION_{name.upper()}"


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", ENV_EXAMPLE.read_text(), re.M))
    expected = {_env_name(name) for name in Settings.model_fields}
    assert expected - documented == set()
    assert documented - expected == set()


def test_the_readme_settings_table_lists_every_setting() -> None:
    readme = (ENV_EXAMPLE.parent / "README.md").read_text()
    table = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", readme, re.M))
    expected = {_env_name(name) for name in Settings.model_fields}
    assert expected - table == set()
    assert table - expected == set()
