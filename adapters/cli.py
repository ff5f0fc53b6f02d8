"""The `companion` command line: the composition root that starts adapters and jobs.

It lives in the top layer because it is the one place that wires every layer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import structlog

from bot.bootstrap import build_core, open_database
from bot.config import Settings, load_settings
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
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_commands.add_parser("upgrade", help="apply database migrations")
    return parser


async def _chat(settings: Settings) -> None:
    from adapters.console.chat import ConsoleChat

    core = await build_core(settings)
    try:
        await ConsoleChat(core, stdin=sys.stdin, stdout=sys.stdout).run()
    finally:
        await core.aclose()


async def _run(settings: Settings, args: argparse.Namespace) -> None:
    platforms = [
        name
        for name, token in (
            ("telegram", settings.telegram_bot_token),
            ("discord", settings.discord_bot_token),
        )
        if token is not None
    ]
    if not platforms:
        log.info("run.no_platform_configured", fallback="terminal chat")
        await _chat(settings)
        return
    raise ConfigurationError(
        f"{', '.join(platforms)} configured, but platform adapters are not part of this "
        "build yet; unset the token(s) to use the terminal chat"
    )


async def _db_upgrade(settings: Settings) -> None:
    engine, embedded = await open_database(settings)
    await engine.dispose()
    if embedded is not None:
        await asyncio.to_thread(embedded.stop)
    print("database is up to date")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `companion` console script."""
    args = _parser().parse_args(argv)
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
