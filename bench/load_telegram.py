"""Load: many simulated people chatting at once through the loopback Telegram fake with the
real `companion run` process, PostgreSQL and a fake model of realistic latency.

Reports errors, messages lost, doubled or left unanswered, the time each turn spends
outside the model (end to end, minus the model's time and the burst window), and the bot
process's memory over the run. Run: `python -m bench.load_telegram` (1,000 people for 60
seconds; `--people`, `--seconds`, `--ramp`, `--think MIN MAX` change it).
`tests/e2e/test_load.py` runs a short version.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from adapters.telegram_bot.flood import OVERALL_PER_SECOND
from memory.store.database import create_engine, migrate, session_factory, start_embedded
from memory.store.tables import Message
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI
from tests.support.load_crowd import MARK, Crowd, LoadConfig, LoadTelegramAPI, SlowModel

KEY = "sk-ant-load-test"
ROOT = Path(__file__).parent.parent


@dataclass
class LoadResult:
    """What the run measured."""

    config: LoadConfig
    sent: int = 0
    answered: int = 0
    unanswered: int = 0
    answered_twice: int = 0
    lost: int = 0
    stored_twice: int = 0
    errors: list[str] = field(default_factory=list)
    exit_code: int | None = None
    end_to_end_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)
    overhead_ms: list[float] = field(default_factory=list)
    before_model_ms: list[float] = field(default_factory=list)
    after_model_ms: list[float] = field(default_factory=list)
    rss_mb: list[tuple[float, float]] = field(default_factory=list)
    cpu_seconds: float = 0.0
    busiest_second: int = 0  # messages into chats
    busiest_second_typing: int = 0
    loop_lag_ms: list[float] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        """Resident memory at the end minus after the first quarter of the run (warm)."""
        if not self.rss_mb:
            return 0.0
        warm = next(
            (mb for at, mb in self.rss_mb if at >= self.config.seconds / 4), self.rss_mb[0][1]
        )
        return self.rss_mb[-1][1] - warm

    def report(self) -> str:
        """The printed report, ending with `figure` lines."""
        c = self.config
        lines = [
            f"load: {c.people} people for {c.seconds:.0f} s through the Telegram fake, "
            f"model latency {c.model_latency:.1f} s, first messages within {c.ramp:.0f} s, "
            f"think {c.think[0]:.0f}-{c.think[1]:.0f} s, burst window {c.burst_window:.1f} s",
            f"  messages sent {self.sent}, answered {self.answered} "
            f"({self.answered / c.seconds:.1f}/s), unanswered {self.unanswered}, "
            f"answered twice {self.answered_twice}, lost {self.lost}, "
            f"stored twice {self.stored_twice}",
            f"  errors logged by the bot {len(self.errors)}, exit code {self.exit_code}",
            f"  bot CPU {self.cpu_seconds:.1f} s in all, "
            f"{1000 * self.cpu_seconds / max(self.answered, 1):.0f} ms per answered message",
            "  end to end  " + _spread(self.end_to_end_ms),
            "  model       " + _spread(self.model_ms),
            "  overhead    " + _spread(self.overhead_ms) + "  (end to end - model - burst window)",
            "    before the model " + _spread(self.before_model_ms),
            "    after the model  " + _spread(self.after_model_ms),
            f"  messages into chats, busiest second: {self.busiest_second} (the bot's flood "
            f"control paces {OVERALL_PER_SECOND} a second, Telegram allows 30); typing "
            f"indicators {self.busiest_second_typing} "
            "(outside that budget)",
            "  load generator's event-loop lag " + _spread(self.loop_lag_ms),
        ]
        if self.rss_mb:
            peak = max(mb for _, mb in self.rss_mb)
            lines.append(
                f"  bot RSS: {self.rss_mb[0][1]:.0f} MB at start, peak {peak:.0f} MB, "
                f"{self.rss_mb[-1][1]:.0f} MB at the end; growth after warm-up "
                f"{self.rss_growth_mb:+.1f} MB"
            )
        lines += [f"  error: {line[:200]}" for line in self.errors[:5]]
        lines.append(f"figure load_p95_overhead_ms {_pct(self.overhead_ms, 0.95):.0f} ms")
        lines.append(f"figure load_rss_growth_mb {self.rss_growth_mb:.1f} MB")
        return "\n".join(lines)


def _pct(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if values else 0.0


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "(none)"
    p50, p95, p99 = (_pct(values, q) for q in (0.5, 0.95, 0.99))
    return f"p50 {p50:.0f} ms  p95 {p95:.0f} ms  p99 {p99:.0f} ms  max {max(values):.0f} ms"


@contextlib.asynccontextmanager
async def database(url: str | None, workdir: Path) -> AsyncIterator[str]:
    """`url`, or an embedded PostgreSQL in `workdir` for the run; migrated."""
    server = None
    if url is None:
        server = await asyncio.to_thread(start_embedded, workdir / "pgdata")
        url = server.url
    engine = create_engine(url)
    await migrate(engine)
    await engine.dispose()
    try:
        yield url
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


async def start_bot(
    config: LoadConfig, url: str, workdir: Path, telegram: str, model: str
) -> asyncio.subprocess.Process:
    """`companion run` against the fakes, logging JSON to `workdir/bot.log`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "COMPANION_", "TELEGRAM_", "DISCORD_", "DATABASE_"))
    }
    env.update(
        DATABASE_URL=url,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=model,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=telegram,
        COMPANION_DATA_DIR=str(workdir),
        COMPANION_BURST_WINDOW_SECONDS=str(config.burst_window),
        COMPANION_LOG_FORMAT="json",
    )
    with (workdir / "bot.log").open("ab") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.cli",
            "run",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd=ROOT,
        )


async def polling(telegram: FakeTelegramAPI, within: float) -> None:
    """Wait until the bot's first getUpdates arrives (the fake tells only once it ends)."""
    async with asyncio.timeout(within):
        while True:  # no event to wait on: poll
            if telegram.get_updates_calls:
                return
            await asyncio.sleep(0.05)


def _read_proc(pid: int) -> tuple[float, float] | None:
    """(resident MB, CPU seconds used) of a process, from Linux `/proc`."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks  # utime + stime
    return (int(found[1]) / 1024 if found else 0.0), cpu


async def sample(pid: int, result: LoadResult, started: float) -> None:
    """The bot's resident memory and CPU time, once a second."""
    while (found := _read_proc(pid)) is not None:
        result.rss_mb.append((time.monotonic() - started, found[0]))
        result.cpu_seconds = found[1]
        await asyncio.sleep(1.0)


async def measure_lag(result: LoadResult, every: float = 0.1) -> None:
    """How late this process's event loop runs (it serves both fakes and the crowd)."""
    while True:
        before = time.monotonic()
        await asyncio.sleep(every)
        result.loop_lag_ms.append((time.monotonic() - before - every) * 1000)


async def run_load(
    config: LoadConfig, *, workdir: Path, database_url: str | None = None
) -> LoadResult:
    """Run the load and measure it."""
    result = LoadResult(config)
    model = SlowModel(config.model_latency)
    telegram = LoadTelegramAPI()
    async with (
        database(database_url, workdir) as url,
        telegram,
        FakeAnthropicAPI(api_key=KEY, responder=model) as api,
    ):
        bot = await start_bot(config, url, workdir, telegram.base_url, api.base_url)
        watchers = [asyncio.create_task(measure_lag(result))]
        crowd = Crowd(config, telegram)
        try:
            await polling(telegram, within=60)
            watchers.append(asyncio.create_task(sample(bot.pid, result, time.monotonic())))
            await crowd.run()
        finally:
            with contextlib.suppress(ProcessLookupError):
                bot.send_signal(signal.SIGTERM)
            result.exit_code = await asyncio.wait_for(bot.wait(), 60)
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        _tally(result, crowd, model, telegram)
        await _check_storage(result, crowd, url)
    result.errors = _errors(workdir / "bot.log")
    return result


def _tally(result: LoadResult, crowd: Crowd, model: SlowModel, telegram: LoadTelegramAPI) -> None:
    result.sent = len(crowd.sent_at)
    result.answered = len(crowd.answers)
    result.unanswered = result.sent - result.answered
    mentions = Counter(
        mark
        for texts in telegram.arrivals.values()
        for _, text in texts
        for mark in MARK.findall(text)
    )
    result.answered_twice = sum(1 for n in mentions.values() if n > 1)
    result.busiest_second = telegram.busiest_second(typing=False)
    result.busiest_second_typing = telegram.busiest_second(typing=True)
    window = result.config.burst_window
    for mark, arrived in crowd.answers.items():
        sent, asked = crowd.sent_at[mark], model.asked_at.get(mark)
        took = model.took.get(mark, 0.0)
        result.end_to_end_ms.append((arrived - sent) * 1000)
        result.model_ms.append(took * 1000)
        result.overhead_ms.append((arrived - sent - took - window) * 1000)
        if asked is not None:
            result.before_model_ms.append((asked - sent - window) * 1000)
            result.after_model_ms.append((arrived - asked - took) * 1000)


async def _check_storage(result: LoadResult, crowd: Crowd, url: str) -> None:
    """Every message sent is stored exactly once."""
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as db:
            query = select(Message.chat_id, Message.platform_message_id)
            rows = (await db.execute(query.where(Message.role == "user"))).all()
    finally:
        await engine.dispose()
    stored = Counter((int(chat or 0), int(message or 0)) for chat, message in rows)
    result.lost = sum(1 for key in crowd.pushed if key not in stored)
    result.stored_twice = sum(1 for n in stored.values() if n > 1)


def _errors(log: Path) -> list[str]:
    """Lines the bot logged at error level or above, and tracebacks."""
    found = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if '"level": "error"' in line or '"level": "critical"' in line or "Traceback" in line:
            found.append(line)
    return found


def main() -> None:
    """Print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=LoadConfig.people)
    parser.add_argument("--seconds", type=float, default=LoadConfig.seconds)
    parser.add_argument("--think", type=float, nargs=2, default=LoadConfig.think)
    parser.add_argument("--ramp", type=float, default=LoadConfig.ramp)
    parser.add_argument("--burst-window", type=float, default=LoadConfig.burst_window)
    parser.add_argument("--model-latency", type=float, default=LoadConfig.model_latency)
    args = parser.parse_args()
    config = LoadConfig(
        people=args.people,
        seconds=args.seconds,
        think=(args.think[0], args.think[1]),
        ramp=args.ramp,
        burst_window=args.burst_window,
        model_latency=args.model_latency,
    )
    with tempfile.TemporaryDirectory() as workdir:
        result = asyncio.run(run_load(config, workdir=Path(workdir)))
    print(result.report())
    out = os.environ.get("COMPANION_BENCH_OUT")
    if out:
        data = {"latencies_ms": {"overhead": result.overhead_ms}}
        (Path(out) / "load_telegram.json").write_text(json.dumps(data))
    if result.errors or result.lost or result.answered_twice or result.exit_code:
        sys.exit(1)


if __name__ == "__main__":
    main()
