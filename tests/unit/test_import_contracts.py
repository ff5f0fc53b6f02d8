"""The import contracts of pyproject.toml: the code keeps them, and the database contract
catches what it is there for (adapters, bot or scheduler importing SQLAlchemy, asyncpg or
memory's tables themselves) while letting them import `memory`, which imports
SQLAlchemy. lint-imports runs in a child process: it finds the packages on its path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the packages in `tree`, with its pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The four packages, wired as the project is: memory talks to the database, bot
    imports memory, scheduler imports bot, adapters import scheduler."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    modules = {
        "memory/__init__.py": "",
        "memory/store/__init__.py": "",
        "memory/store/tables.py": "import sqlalchemy\n",
        "memory/store/claims.py": "import asyncpg\n\nimport memory.store.tables\n",
        "memory/recall/__init__.py": "",
        "memory/learning/__init__.py": "",
        "memory/care/__init__.py": "",
        "bot/memory_gateway.py": "",
        "bot/commands/__init__.py": "",
        "bot/__init__.py": "import memory.store.claims\n",
        "scheduler/__init__.py": "import bot\nimport memory.store.claims\n",
        "adapters/__init__.py": "import scheduler\n",
    }
    for name, source in modules.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return tmp_path


def test_the_code_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_calling_memory_is_allowed_but_a_statement_above_it_is_not(tree: Path) -> None:
    kept = lint_imports(tree)
    assert kept.returncode == 0, kept.stdout + kept.stderr

    (tree / "scheduler/jobs.py").write_text("from sqlalchemy import text\n")
    (tree / "bot/outbound.py").write_text("from memory.store.tables import Identity\n")
    (tree / "adapters/health.py").write_text("import asyncpg\n")
    broken = lint_imports(tree)

    assert broken.returncode != 0
    report = " ".join(broken.stdout.split())
    assert "scheduler is not allowed to import sqlalchemy" in report
    assert "bot is not allowed to import memory.store.tables" in report
    assert "adapters is not allowed to import asyncpg" in report
