"""The deployment files, read statically (no container engine runs here): a multi-stage
Dockerfile whose final stage is a slim Python without build tools, running as a
non-root user with a health check on the ops endpoint; and a compose file with a
pgvector PostgreSQL and the bot, started with `DATABASE_URL` through `companion run`,
the entry point the process tests start."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.config import Settings
from tests.support import companion_process

ROOT = Path(__file__).resolve().parents[2]
BUILD_TOOLS = re.compile(
    r"\b(build-essential|gcc|g\+\+|clang|make|cmake|cargo|rustc|[\w.+-]+-dev)\b"
)


@dataclass
class Stage:
    """One `FROM` of the Dockerfile and its instructions, in order."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """The arguments of every `keyword` instruction of this stage."""
        return [args for kw, args in self.instructions if kw == keyword]


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction; comments dropped, continuations joined."""
    lines = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            found.append((keyword.upper(), " ".join(args.split())))
    return found


def stages(dockerfile: str) -> list[Stage]:
    """The build stages, each with its instructions (a `FROM ${ARG}` resolved to the
    default of the `ARG` declared before the first `FROM`)."""
    found: list[Stage] = []
    defaults: dict[str, str] = {}
    for keyword, args in instructions(dockerfile):
        if keyword == "ARG" and not found:
            name, _, default = args.partition("=")
            defaults[name] = default
        if keyword == "FROM":
            words = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], args).split()
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else None
            found.append(Stage(words[0], name))
        elif found:
            found[-1].instructions.append((keyword, args))
    return found


def exec_form(args: str) -> list[str]:
    """A CMD/ENTRYPOINT in JSON exec form, or shell form split into words."""
    return list(json.loads(args)) if args.startswith("[") else shlex.split(args)


def final_stage() -> Stage:
    return stages((ROOT / "Dockerfile").read_text())[-1]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_the_image_is_built_in_stages_and_runs_slim() -> None:
    built = stages((ROOT / "Dockerfile").read_text())
    assert len(built) >= 2
    final = built[-1]
    assert re.fullmatch(r"python:3\.\d+-slim(-\w+)?", final.image), final.image
    sources = re.findall(r"--from=(\S+)", " ".join(final.all("COPY")))
    assert sources, "the final stage copies the built environment from an earlier stage"
    assert set(sources) <= {stage.name for stage in built[:-1]}


def test_the_final_stage_installs_no_build_tools() -> None:
    built = stages((ROOT / "Dockerfile").read_text())
    for command in built[-1].all("RUN"):
        assert not BUILD_TOOLS.search(command), command
    # The check does see build tools where they belong: in the stage that compiles.
    assert BUILD_TOOLS.search(" ".join(built[0].all("RUN")))


def test_the_final_stage_runs_unprivileged_with_a_health_check() -> None:
    final = final_stage()
    users = final.all("USER")
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    index = [kw for kw, _ in final.instructions].index("USER")
    assert "CMD" in [kw for kw, _ in final.instructions[index:]]  # runs as that user
    (check,) = final.all("HEALTHCHECK")
    port = Settings.model_fields["ops_http_port"].default
    assert f"127.0.0.1:{port}/healthz" in check
    env = " ".join(final.all("ENV"))
    assert "COMPANION_OPS_HTTP_ENABLED=true" in env  # the health check has something to ask
    # Inside the container the endpoint listens on every interface, so a scraper or the
    # orchestrator can reach it (outside one, the default stays 127.0.0.1).
    assert "COMPANION_OPS_HTTP_HOST=0.0.0.0" in env
    assert final.all("EXPOSE") == [str(port)]


def test_the_image_runs_companion_run_the_process_tests_entry_point() -> None:
    (cmd,) = final_stage().all("CMD")
    assert exec_form(cmd) == ["companion", "run"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["companion"] == "adapters.cli:main"
    assert "adapters.cli" in Path(companion_process.__file__).read_text()


def test_the_image_holds_every_package_and_no_secrets() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    built = stages((ROOT / "Dockerfile").read_text())
    copied = " ".join(args for stage in built[:-1] for args in stage.all("COPY"))
    for needed in [*packages, "pyproject.toml", project["project"]["readme"]]:
        assert re.search(rf"(^|\s){re.escape(needed)}(\s|$)", copied), needed
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".git"} <= set(ignored)


def test_compose_runs_the_bot_against_a_pgvector_postgres() -> None:
    services = compose()["services"]
    databases = [n for n, s in services.items() if "pgvector" in str(s.get("image", ""))]
    assert len(databases) == 1
    (db,) = databases
    assert "healthcheck" in services[db]
    bots = [n for n, s in services.items() if "build" in s]
    assert len(bots) == 1
    bot = services[bots[0]]
    url = bot["environment"]["DATABASE_URL"]
    assert re.match(rf"postgres(ql)?://[^@]+@{db}(:\d+)?/\w+$", url), url
    assert bot["depends_on"][db]["condition"] == "service_healthy"
    port = Settings.model_fields["ops_http_port"].default
    assert f"127.0.0.1:{port}/healthz" in " ".join(bot["healthcheck"]["test"])
    assert "command" not in bot and "entrypoint" not in bot  # the image's `companion run`
    grace = str(bot.get("stop_grace_period", "10s"))
    assert int(grace.rstrip("s")) >= 30  # docker's default of 10 s cuts a graceful stop short
