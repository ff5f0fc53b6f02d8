"""The `companion` command line: the composition root that starts adapters and jobs.

It lives in the top layer because it is the one place that wires every layer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

import structlog

from adapters.import_cli import add_parser as add_import_parser
from adapters.import_cli import run_import
from bot import metrics
from bot.bootstrap import Core, build_core, build_embedder_from, open_database
from bot.config import Settings, load_settings
from bot.delivery import Delivery
from bot.errors import CompanionError, ConfigurationError
from bot.logs import configure_logging

log = structlog.get_logger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="companion", description="A companion that remembers what matters to you."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run", help="start every configured platform (or the terminal chat if none)"
    )
    roles = run.add_mutually_exclusive_group()
    roles.add_argument("--no-scheduler", action="store_true", help="do not run proactive jobs")
    roles.add_argument("--scheduler-only", action="store_true", help="run only proactive jobs")
    commands.add_parser("chat", help="talk to the companion in this terminal")
    commands.add_parser("stats", help="print usage, latency, token and memory figures")
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_commands.add_parser("upgrade", help="apply database migrations")
    discord = commands.add_parser("discord", help="Discord set-up")
    discord_commands = discord.add_subparsers(
        dest="discord_command", required=True, metavar="ACTION"
    )
    discord_commands.add_parser(
        "sync-commands", help="register the slash commands with Discord (once, not every start)"
    )
    memory = commands.add_parser("memory", help="memory maintenance")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    memory_commands.add_parser(
        "reembed", help="re-embed every message and memory (after changing the embedder)"
    )
    add_import_parser(commands)
    return parser


async def _maintain(core: Core, every: float = 60.0) -> None:
    """Close idle sessions and extract their memories, every minute."""
    gap = timedelta(minutes=core.settings.session_idle_minutes)
    while True:
        await asyncio.sleep(every)
        try:
            with metrics.observe_job("sweep"):
                await core.memory.sweep(idle_gap=gap)
        except CompanionError as exc:
            log.warning("maintenance.failed", error=type(exc).__name__)


async def _chat(settings: Settings, *, scheduler: bool = True) -> None:
    from adapters.console.chat import ConsoleChat

    core = await build_core(settings)
    stop = asyncio.Event()
    jobs = asyncio.create_task(
        _proactive(core, stop, ["console"]) if scheduler else _maintain_until(core, stop)
    )
    try:
        await ConsoleChat(core, stdin=sys.stdin, stdout=sys.stdout).run()
    finally:
        stop.set()
        await jobs
        await core.aclose()


def _platforms(settings: Settings) -> list[str]:
    return [
        name
        for name, token in (
            ("telegram", settings.telegram_bot_token),
            ("discord", settings.discord_bot_token),
        )
        if token is not None
    ]


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM: stop taking updates, finish, close."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, _request_stop, stop, signum)
    return stop


def _request_stop(stop: asyncio.Event, signum: int) -> None:
    if not stop.is_set():
        log.info("run.stopping", signal=signal.Signals(signum).name)
    stop.set()


async def _run(settings: Settings, args: argparse.Namespace) -> None:
    platforms = _platforms(settings)
    if not platforms:
        if args.scheduler_only:
            raise ConfigurationError(
                "--scheduler-only needs a platform to send through: "
                "set TELEGRAM_BOT_TOKEN or DISCORD_BOT_TOKEN"
            )
        log.info("run.no_platform_configured", fallback="terminal chat")
        await _chat(settings, scheduler=not args.no_scheduler)
        return
    core = await build_core(settings)
    stop = _stop_on_signals()
    # The platforms disconnect only once the jobs sending through them have finished, so
    # a check-in being written when the signal comes is still delivered.
    jobs_done = asyncio.Event()
    try:
        async with contextlib.AsyncExitStack() as senders, asyncio.TaskGroup() as tasks:
            if args.scheduler_only:
                for platform in platforms:
                    core.outbound.register(
                        await senders.enter_async_context(_delivery_only(core, platform))
                    )
            else:
                _start_adapters(core, stop, jobs_done, platforms, tasks)
            jobs = (
                _maintain_until(core, stop)
                if args.no_scheduler
                else _proactive(core, stop, platforms)
            )
            tasks.create_task(_then_set(jobs, jobs_done))
            if settings.ops_http_enabled or settings.public_url:
                from adapters.ops_http import serve_ops

                tasks.create_task(serve_ops(core, stop))
            role = (
                "adapters" if args.no_scheduler else "scheduler" if args.scheduler_only else "all"
            )
            log.info("run.started", platforms=platforms, role=role)
    finally:
        await core.aclose()
        log.info("run.stopped")


def _start_adapters(
    core: Core,
    stop: asyncio.Event,
    jobs_done: asyncio.Event,
    platforms: list[str],
    tasks: asyncio.TaskGroup,
) -> None:
    """Telegram stops taking updates at `stop` (it keeps unconfirmed ones for the next
    start) and disconnects at `jobs_done`; Discord, which sends nothing again, keeps
    answering until `jobs_done`. Each runs under `supervise`: one that fails is restarted
    on its own while the other, the scheduler and the ops endpoint carry on."""
    from adapters.supervise import supervise

    if "telegram" in platforms:
        from adapters.telegram_bot import run_telegram

        core.health.set("telegram", False, "starting")
        tasks.create_task(
            supervise(
                "telegram",
                lambda: run_telegram(core, stop, jobs_done),
                health=core.health,
                stop=stop,
                on_give_up=lambda: core.outbound.give_up("telegram"),
            )
        )
    if "discord" in platforms:
        from adapters.discord_bot import run_discord

        core.health.set("discord", False, "starting")
        tasks.create_task(
            supervise(
                "discord",
                lambda: run_discord(core, jobs_done),
                health=core.health,
                stop=stop,
                on_give_up=lambda: core.outbound.give_up("discord"),
            )
        )


def _delivery_only(core: Core, platform: str) -> AbstractAsyncContextManager[Delivery]:
    """A platform's delivery port without its adapter (for `--scheduler-only`)."""
    if platform == "telegram":
        from adapters.telegram_bot import open_telegram_delivery

        return open_telegram_delivery(core)
    from adapters.discord_bot import open_discord_delivery

    return open_discord_delivery(core)


async def _proactive(core: Core, stop: asyncio.Event, platforms: Sequence[str]) -> None:
    """The scheduler (check-ins, follow-ups, nightly patrol and diary, the idle-session
    sweep), started once every platform can deliver (or was given up after its crash
    limit), so the catch-up after a restart is not failed for want of a connection."""
    from scheduler.runner import run_scheduler

    ready = asyncio.create_task(core.outbound.wait_for(platforms))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    stopping.cancel()
    if not stop.is_set():
        await run_scheduler(core, stop)


async def _then_set(work: Awaitable[None], done: asyncio.Event) -> None:
    """Await `work`, then set `done` however it ended."""
    try:
        await work
    finally:
        done.set()


async def _maintain_until(core: Core, stop: asyncio.Event) -> None:
    maintenance = asyncio.create_task(_maintain(core))
    await stop.wait()
    maintenance.cancel()


async def _db_upgrade(settings: Settings) -> None:
    engine, embedded = await open_database(settings)
    await engine.dispose()
    if embedded is not None:
        await asyncio.to_thread(embedded.stop)
    print("database is up to date")


async def _reembed(settings: Settings) -> None:
    from memory.recall.reembed import reembed
    from memory.store.database import session_factory

    embedder = build_embedder_from(settings)
    engine, embedded = await open_database(settings)
    try:
        count = await reembed(session_factory(engine), embedder, progress=_progress_bar)
    finally:
        await engine.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
    print(f"\nre-embedded {count:,} rows with {embedder.name} ({embedder.dim} dimensions)")


def _progress_bar(done: int, total: int) -> None:
    width = 40
    filled = width * done // total if total else width
    percent = 100 * done // total if total else 100
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} ({percent}%)", end="")
    sys.stdout.flush()


async def _sync_discord_commands(settings: Settings) -> None:
    from adapters.discord_bot import sync_commands

    if settings.discord_bot_token is None or settings.discord_application_id is None:
        raise ConfigurationError("DISCORD_BOT_TOKEN and DISCORD_APPLICATION_ID must be set")
    print(f"registered {await sync_commands(settings)} slash commands with Discord")


def _first_companion_error(group: BaseExceptionGroup[BaseException]) -> CompanionError | None:
    """The first of our errors inside a task group's failure, if any."""
    for exc in group.exceptions:
        if isinstance(exc, CompanionError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_companion_error(exc)
            if found is not None:
                return found
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `companion` console script."""
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except BaseExceptionGroup as group:
        error = _first_companion_error(group)
        if error is None:
            raise
        print(f"companion: {error}", file=sys.stderr)
        return 2 if isinstance(error, ConfigurationError) else 1


def _main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
        interactive = args.command == "chat" or (args.command == "run" and sys.stdin.isatty())
        level = "WARNING" if interactive and settings.log_level == "INFO" else settings.log_level
        configure_logging(level, settings.log_format)
        if args.command == "chat":
            asyncio.run(_chat(settings))
        elif args.command == "run":
            asyncio.run(_run(settings, args))
        elif args.command == "db":
            asyncio.run(_db_upgrade(settings))
        elif args.command == "stats":
            from adapters.stats import print_stats

            asyncio.run(print_stats(settings))
        elif args.command == "memory":
            asyncio.run(_reembed(settings))
        elif args.command == "discord":
            asyncio.run(_sync_discord_commands(settings))
        elif args.command == "import":
            return asyncio.run(run_import(settings, args, _progress_bar))
    except ConfigurationError as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return 2
    except CompanionError as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
