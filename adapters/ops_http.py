"""The operations endpoint: `/healthz` (database, adapters, scheduler) and `/metrics`
(Prometheus text format) over aiohttp. Off by default; bound to localhost by default.
With a public URL it also serves the memory panel under `/memory-panel/` (and runs)."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web

from bot import metrics
from bot.bootstrap import Core
from bot.errors import ConfigurationError
from bot.health import Health, check_health
from memory.store.database import Engine

log = structlog.get_logger(__name__)

_ENGINE = web.AppKey("engine", Engine)
_HEALTH = web.AppKey("health", Health)


async def healthz(request: web.Request) -> web.Response:
    """200 with the report when everything running is healthy, else 503 saying what isn't."""
    report = await check_health(request.app[_ENGINE], request.app[_HEALTH])
    return web.json_response(report.as_json(), status=200 if report.ok else 503)


async def metrics_text(request: web.Request) -> web.Response:
    """Every metric, with the health gauges refreshed first."""
    await check_health(request.app[_ENGINE], request.app[_HEALTH])
    body = metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})


def build_app(
    engine: Engine, health: Health, panel: web.Application | None = None
) -> web.Application:
    """The aiohttp application with both routes (and the memory panel when it is on)."""
    app = web.Application()
    app[_ENGINE] = engine
    app[_HEALTH] = health
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_text)
    if panel is not None:
        app.add_subapp("/memory-panel/", panel)
    return app


class OpsServer:
    """The endpoint's lifecycle: `start` listens, `port` is the bound port, `stop` closes."""

    def __init__(
        self,
        engine: Engine,
        health: Health,
        *,
        host: str,
        port: int,
        panel: web.Application | None = None,
    ) -> None:
        self._app = build_app(engine, health, panel)
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The port listened on (the real one when configured as 0)."""
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the operations endpoint is not running")
        return int(self._runner.addresses[0][1])

    async def start(self) -> None:
        """Listen on the configured host and port."""
        runner = web.AppRunner(
            self._app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigurationError(
                f"COMPANION_OPS_HTTP_HOST/_PORT: cannot listen on {self._host}:{self._port} "
                f"({exc.strerror or type(exc).__name__})"
            ) from exc
        self._runner = runner
        bound = [f"{address[0]}:{address[1]}" for address in runner.addresses]
        log.info("ops_http.started", host=self._host, port=self.port, bound=bound)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            log.info("ops_http.stopped")


def panel_app(core: Core) -> web.Application | None:
    """The memory panel's routes when a public URL turns it on, else None."""
    deps = core.commands
    if deps is None or deps.panel is None:
        return None
    from adapters.panel.app import build_panel

    token = core.settings.telegram_bot_token
    return build_panel(deps, deps.panel, bot_token=token.get_secret_value() if token else "")


async def serve_ops(core: Core, stop: asyncio.Event) -> None:
    """Serve the endpoint from the core's settings until `stop` is set (the CLI's task)."""
    settings = core.settings
    server = OpsServer(
        core.engine,
        core.health,
        host=settings.ops_http_host,
        port=settings.ops_http_port,
        panel=panel_app(core),
    )
    await server.start()
    try:
        await stop.wait()
    finally:
        await server.stop()
