"""The dependency ranges in pyproject.toml: each has an upper bound, so a new major (or,
for the linters, a new minor) release cannot break `make test` on a fresh machine, and
the environment the tests run in satisfies every range."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
UNBOUNDED_ON_PURPOSE = {"tzdata"}  # time zone data: newer is always right


def requirements(*extras: str) -> list[Requirement]:
    """The runtime requirements and those of `extras`."""
    project = PYPROJECT["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(
    "requirement",
    [r for r in requirements("dev", "bench") if r.name not in UNBOUNDED_ON_PURPOSE],
    ids=str,
)
def test_every_dependency_has_an_upper_bound(requirement: Requirement) -> None:
    operators = {spec.operator for spec in requirement.specifier}
    assert operators & {"<", "<=", "~=", "=="}, f"{requirement} has no upper bound"


@pytest.mark.parametrize("name", ["ruff", "mypy"])
def test_the_linters_stay_on_the_installed_minor_release(name: str) -> None:
    (requirement,) = [r for r in requirements("dev") if r.name == name]
    major, minor = version(name).split(".")[:2]
    assert not requirement.specifier.contains(f"{major}.{int(minor) + 1}.0")


def test_the_installed_versions_satisfy_the_ranges() -> None:
    unmet = []
    for requirement in requirements("dev"):
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            unmet.append(f"{requirement.name} is not installed")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{requirement.name} {installed} is outside {requirement.specifier}")
    assert unmet == []
