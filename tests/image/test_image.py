"""The Dockerfile, built and run: `.ci/build_image` builds it with buildah (no daemon,
vfs storage, chroot isolation) FROM a debootstrapped Debian, as no registry for images is
reachable; then the image's own `companion run` starts as the image says (its user, its
environment, its embedded PostgreSQL) with the host's network, talks to the loopback
Telegram and Anthropic fakes, and serves `/healthz` on all interfaces."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI

ROOT = Path(__file__).resolve().parents[2]
ALICE = 4848
BUILD_SECONDS = 1500


def _buildah() -> list[str]:
    cache = os.environ.get("COMPANION_IMAGE_CACHE", "/var/cache/companion-image")
    return [
        "buildah",
        "--root",
        f"{cache}/storage",
        "--runroot",
        f"{cache}/run",
        "--storage-driver",
        "vfs",
    ]


async def _run(*args: str, within: float) -> str:
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=within)
    assert process.returncode == 0, f"{args[:3]}: {err.decode()[-3000:]}"
    return out.decode()


@pytest.fixture(scope="module")
async def image() -> str:
    """The image built from this checkout (layers cached between builds), or the one
    `COMPANION_IMAGE` names (already built by `.ci/build_image`)."""
    if os.environ.get("COMPANION_IMAGE"):
        return os.environ["COMPANION_IMAGE"]
    built = await _run(str(ROOT / ".ci" / "build_image"), within=BUILD_SECONDS)
    return built.strip().splitlines()[-1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def container(
    image: str, env: dict[str, str], log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The image's command in a working container, its output in `log`; SIGTERM and
    removal at the end."""
    name = (await _run(*_buildah(), "from", "--quiet", image, within=300)).strip()
    settings = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    output = log.open("wb")
    process = await asyncio.create_subprocess_exec(
        *_buildah(),
        "run",
        "--isolation",
        "chroot",
        *settings,
        name,
        "--",
        "companion",
        "run",
        stdout=output,
        stderr=output,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=60)
            except TimeoutError:
                process.kill()
                await process.wait()
        output.close()
        await _run(*_buildah(), "rm", name, within=300)


def _companion_in(root: int) -> int:
    """The pid of `companion run` under the `buildah run` process `root`. buildah's chroot
    isolation answers a SIGTERM by killing its child, so the test stops the companion
    itself, as `docker stop` would (same pid space: chroot isolation has no pid namespace;
    the process tree is buildah, buildah-chroot-runtime, buildah-chroot-exec, companion)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    waiting = [root]
    while waiting:
        pid = waiting.pop()
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            runs_it = any(part.endswith(b"/companion") for part in command)
            if runs_it and not command[0].startswith(b"buildah"):  # not its chroot wrappers
                return pid
        waiting += children.get(pid, [])
    raise AssertionError("no companion process under buildah run")


async def _healthz(url: str, within: float) -> tuple[int, dict[str, object]]:
    """The first 200 of /healthz, or the last answer when `within` runs out."""
    last: tuple[int, dict[str, object]] = (0, {})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    async with aiohttp.ClientSession() as http:
        while loop.time() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
                    last = (response.status, json.loads(await response.text()))
                    if response.status == 200:
                        return last
            await asyncio.sleep(1)
    return last


@pytest.mark.timeout(BUILD_SECONDS + 600)
async def test_the_built_image_runs_and_reports_healthy_on_all_interfaces(
    image: str, tmp_path: Path
) -> None:
    port = _free_port()
    async with FakeAnthropicAPI() as anthropic, FakeTelegramAPI() as telegram:
        anthropic.queue_text("Hello from the image.")
        env = {
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE_URL": telegram.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-image-test",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "COMPANION_OPS_HTTP_PORT": str(port),
        }
        log = tmp_path / "container.log"
        async with container(image, env, log) as process:
            status, report = await _healthz(f"http://127.0.0.1:{port}/healthz", within=240)
            assert process.returncode is None
            assert status == 200, (report, log.read_text()[-3000:])
            assert report["database"] == "ok" and report["adapters"] == {"telegram": "connected"}
            telegram.push_message(ALICE, "hello, image", first_name="Alice")
            sent = await telegram.wait_for_sent(ALICE, within=60)
            assert "Hello from the image." in sent[0].text
            os.kill(_companion_in(process.pid), signal.SIGTERM)
            await asyncio.wait_for(process.wait(), timeout=60)
        logs = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert process.returncode == 0
    started = next(entry for entry in logs if entry.get("event") == "ops_http.started")
    assert started["bound"] == [f"0.0.0.0:{port}"]  # the image's setting, not localhost
    assert any(entry.get("event") == "run.stopped" for entry in logs)
