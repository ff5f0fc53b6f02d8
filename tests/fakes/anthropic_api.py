"""A loopback fake of Anthropic's Messages API (POST /v1/messages) for tests through the SDK.

It validates requests like the real API (400/401 with the real error JSON), answers
from a script (`queue_text`, `queue_tool_use`, `queue_error`, `queue_delay`) or else from
a responder function of the request JSON, simulates prompt caching in `usage`, and
records every request in `requests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.prompt_cache import TTL_SECONDS, PromptCache, is_breakpoint, prompt_blocks, ttl_of
from tests.fakes.tool_schemas import schema_problem

DEFAULT_REPLY = "Hello from the fake model."
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {"rate_limit_error": "Rate limited", "overloaded_error": "Overloaded"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
MAX_CACHE_BREAKPOINTS = 4


@dataclass(frozen=True)
class TextReply:
    """Answer with one text block."""

    text: str
    stop_reason: str = "end_turn"


@dataclass(frozen=True)
class ToolUseReply:
    """Answer with a tool_use block (after optional text)."""

    name: str
    input: dict[str, Any]
    text: str = ""
    stop_reason: str = "tool_use"  # "max_tokens": cut off inside the call


@dataclass(frozen=True)
class ErrorReply:
    """Answer with an API error in the real JSON shape."""

    status: int
    error_type: str
    message: str
    retry_after: float | None = None


@dataclass(frozen=True)
class DelayReply:
    """Wait, then answer with `then` (or the responder); long enough to time a client out."""

    seconds: float
    then: Step | None = None


Step = TextReply | ToolUseReply | ErrorReply | DelayReply
Responder = Callable[[dict[str, Any]], Step | str | Awaitable[Step | str]]


def _default_responder(body: dict[str, Any]) -> Step:
    return TextReply(DEFAULT_REPLY)


class FakeAnthropicAPI:
    """The Messages API on 127.0.0.1; `base_url` goes to the client's `base_url`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        responder: Responder | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api_key = api_key
        self.responder: Responder = responder or _default_responder
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._script: deque[Step] = deque()
        self.cache = PromptCache(clock)
        self.usages: list[tuple[str, dict[str, Any]]] = []
        """(model, usage) of every answered request, in order."""
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._port = 0

    # Script

    def queue(self, step: Step) -> None:
        """Answer the next unanswered request with `step`."""
        self._script.append(step)

    def queue_text(self, text: str, stop_reason: str = "end_turn") -> None:
        """Answer the next request with text."""
        self.queue(TextReply(text, stop_reason))

    def queue_tool_use(
        self, name: str, input: dict[str, Any], text: str = "", stop_reason: str = "tool_use"
    ) -> None:
        """Answer the next request with a call of tool `name` (cut off at max_tokens when
        `stop_reason` says so: the input is then whatever was finished)."""
        self.queue(ToolUseReply(name, dict(input), text, stop_reason))

    def queue_error(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next request with an error (type from the status unless given)."""
        kind = error_type or ERROR_TYPES.get(status, "api_error")
        text = message or ERROR_MESSAGES.get(kind, f"fake {kind}")
        self.queue(ErrorReply(status, kind, text, retry_after))

    def queue_delay(self, seconds: float, then: Step | None = None) -> None:
        """Answer the next request only after `seconds` (to trigger client timeouts)."""
        self.queue(DelayReply(seconds, then))

    @property
    def last_request(self) -> dict[str, Any]:
        """The JSON body of the latest request."""
        return self.requests[-1]

    # Lifecycle

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT` once started."""
        if self._runner is None:
            raise RuntimeError("the fake Messages API is not running")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        self._closing = asyncio.Event()
        self._runner = web.AppRunner(
            app, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Finish pending delays and close the server."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeAnthropicAPI:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # HTTP

    async def _handle(self, request: web.Request) -> web.Response:
        self.request_headers.append(dict(request.headers))
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "There was an error parsing the body.")
        if isinstance(body, dict):
            self.requests.append(body)
        problem = self._check_headers(request) or validate(body)
        if problem is not None:
            return _error(*problem)
        step = self._script.popleft() if self._script else await self._respond(body)
        return await self._answer(step, body)

    def _check_headers(self, request: web.Request) -> tuple[int, str, str] | None:
        key = _api_key(request)
        if not key:
            return 401, "authentication_error", "x-api-key header is required"
        if self.api_key is not None and key != self.api_key:
            return 401, "authentication_error", "invalid x-api-key"
        if "anthropic-version" not in request.headers:
            return 400, "invalid_request_error", "anthropic-version: header is required"
        return None

    async def _respond(self, body: dict[str, Any]) -> Step:
        result = self.responder(body)
        if inspect.isawaitable(result):
            result = await result
        return TextReply(result) if isinstance(result, str) else result

    async def _answer(self, step: Step, body: dict[str, Any]) -> web.Response:
        if isinstance(step, DelayReply):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=step.seconds)
            return await self._answer(step.then or await self._respond(body), body)
        if isinstance(step, ErrorReply):
            return _error(step.status, step.error_type, step.message, step.retry_after)
        return web.json_response(self._message(step, body), headers=_request_id())

    def _message(self, step: TextReply | ToolUseReply, body: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        stop_reason = step.stop_reason
        if isinstance(step, ToolUseReply):
            tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
            content.append(
                {"type": "tool_use", "id": tool_id, "name": step.name, "input": step.input}
            )
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self._usage(body, content),
        }

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, Any]:
        """Token counts with the prompt cache read and written under the real rules."""
        usage = self.cache.usage(body).as_json()
        usage["output_tokens"] = max(1, len(json.dumps(content)) // 4)
        self.usages.append((str(body["model"]), usage))
        return usage


def _api_key(request: web.Request) -> str | None:
    """The key from `x-api-key` or, as this SDK sends it, `Authorization: Bearer`."""
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[len("bearer ") :].strip() or None
    return request.headers.get("x-api-key") or None


def _request_id() -> dict[str, str]:
    return {"request-id": f"req_{uuid.uuid4().hex[:24]}"}


def _error(
    status: int, error_type: str, message: str, retry_after: float | None = None
) -> web.Response:
    headers = _request_id()
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    body = {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": headers["request-id"],
    }
    return web.json_response(body, status=status, headers=headers)


# Validation, in the real API's words where we know them


def validate(body: Any) -> tuple[int, str, str] | None:
    """(400, invalid_request_error, message) for a request the real API would refuse."""
    if not isinstance(body, dict):
        return _invalid("body: Input should be a valid dictionary")
    for check in (_check_fields, _check_system, _check_tools, _check_messages, _check_cache):
        problem = check(body)
        if problem is not None:
            return _invalid(problem)
    return None


def _invalid(message: str) -> tuple[int, str, str]:
    return 400, "invalid_request_error", message


def _check_fields(body: dict[str, Any]) -> str | None:
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a valid string"
    max_tokens = body["max_tokens"]
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        return "max_tokens: Input should be a valid integer greater than or equal to 0"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: at least one message is required"
    return None


def _check_system(body: dict[str, Any]) -> str | None:
    system = body.get("system")
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: Input should be a valid string or list"
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"system.{index}.type: Input should be 'text'"
        if not block.get("text"):
            return "system: text content blocks must be non-empty"
    return None


def _check_tools(body: dict[str, Any]) -> str | None:
    names = set()
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            return f"tools.{index}: Input should be a valid dictionary"
        if not TOOL_NAME.match(str(tool.get("name", ""))):
            return (
                f"tools.{index}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{index}.custom.input_schema.type: Input should be 'object'"
        if tool["name"] in names:
            return "tools: Tool names must be unique."
        if not isinstance(tool.get("description", ""), str):
            return f"tools.{index}.custom.description: Input should be a valid string"
        if schema_problem(schema) is not None:
            return (
                f"tools.{index}.custom.input_schema: JSON schema is invalid. It must match "
                "JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12)."
            )
        names.add(tool["name"])
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
    if choice["type"] == "tool" and choice.get("name") not in names:
        return f"tool_choice.name: Tool '{choice.get('name')}' not found in provided tools"
    return None


def _check_messages(body: dict[str, Any]) -> str | None:
    messages = body["messages"]
    previous_role = None
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if index == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if role == previous_role:
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        previous_role = role
        last = index == len(messages) - 1
        problem = _check_content(index, message.get("content"), last and role == "assistant")
        problem = problem or _check_tool_pairing(messages, index)
        if problem is not None:
            return problem
    return None


def _check_content(index: int, content: Any, may_be_empty: bool) -> str | None:
    if isinstance(content, str):
        if content or may_be_empty:
            return None
        return (
            f"messages.{index}: all messages must have non-empty content except for "
            "the optional final assistant message"
        )
    if not isinstance(content, list) or (not content and not may_be_empty):
        return f"messages.{index}.content: Input should be a valid string or non-empty list"
    for position, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in ("text", "tool_use", "tool_result", "image", "document"):
            return f"messages.{index}.content.{position}.type: unknown content block type"
        if kind == "text" and not block.get("text"):
            return "messages: text content blocks must be non-empty"
    return None


def _check_tool_pairing(messages: list[dict[str, Any]], index: int) -> str | None:
    """Each tool_use is answered by a tool_result in the very next message, and vice versa."""
    results = _block_ids(messages[index], "tool_result", "tool_use_id")
    asked = _block_ids(messages[index - 1], "tool_use", "id") if index > 0 else []
    unexpected = [tool_id for tool_id in results if tool_id not in asked]
    if unexpected:
        return (
            f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(unexpected)}. Each `tool_result` block must have a corresponding "
            "`tool_use` block in the previous message."
        )
    calls = _block_ids(messages[index], "tool_use", "id")
    following = messages[index + 1] if index + 1 < len(messages) else {}
    answered = _block_ids(following, "tool_result", "tool_use_id")
    missing = [tool_id for tool_id in calls if tool_id not in answered]
    if missing and following:
        return (
            f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    return None


def _block_ids(message: dict[str, Any], kind: str, key: str) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [str(block.get(key)) for block in content if block.get("type") == kind]


def _check_cache(body: dict[str, Any]) -> str | None:
    marked = [block for block in prompt_blocks(body) if is_breakpoint(block)]
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marked)}."
        )
    ttls = []
    for block in marked:
        control = block["cache_control"]
        if not isinstance(control, dict) or control.get("type") != "ephemeral":
            return "cache_control.type: Input should be 'ephemeral'"
        if ttl_of(block) not in TTL_SECONDS:
            return "cache_control.ephemeral.ttl: Input should be '5m' or '1h'"
        ttls.append(ttl_of(block))
    if "1h" in ttls and "5m" in ttls[: len(ttls) - ttls[::-1].index("1h")]:
        return (
            "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control "
            "block. Note that blocks are processed in the following order: `tools`, "
            "`system`, `messages`."
        )
    return None
