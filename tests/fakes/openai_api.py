"""A loopback fake of an OpenAI-compatible API (`POST /v1/chat/completions`,
`POST /v1/embeddings`) for tests through the real `openai` SDK.

It behaves like Ollama's `/v1`: answers stream as SSE chunks ending with `data: [DONE]`
(tool calls as streamed `tool_calls` deltas, usage in a last chunk when asked), a model
without tool support refuses `tools` with Ollama's 400, a model may lack
`response_format` too, an unknown model is a 404 in OpenAI's error shape, and a first
token may be slow. Like a cloud router, it can answer 429 with `retry-after`, or 5xx.

Answers come from a script (`queue_text`, `queue_tool_call`, `queue_error`,
`queue_delay`, `queue_slow_first_token`) or else from a responder function of the
request JSON. A scripted tool call asked for without tools (the JSON modes) is served
as the JSON object in the text, so one script works whatever the client's mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
from aiohttp import web

from tests.fakes.tool_schemas import OPENAI_NAME, schema_problem

DEFAULT_REPLY = "Hello from the fake model."
EMBEDDING_DIM = 768  # nomic-embed-text's width


@dataclass(frozen=True)
class ModelTraits:
    """What a served model supports."""

    tools: bool = True
    response_format: bool = True
    embedding_dim: int = EMBEDDING_DIM
    embedding_dimensions: bool = True  # honours `dimensions` (Matryoshka models)
    max_tokens: bool = True  # False: only `max_completion_tokens` (OpenAI's o-series)


@dataclass(frozen=True)
class TextReply:
    """Answer with text, streamed in a few pieces."""

    text: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCallReply:
    """Answer with a call of `name` (after optional text); `arguments` as a dict, or as
    a raw string to send something that is not JSON."""

    name: str
    arguments: dict[str, Any] | str
    text: str = ""
    finish_reason: str = "tool_calls"  # "length": cut off inside the call


@dataclass(frozen=True)
class ErrorReply:
    """Answer with an error in OpenAI's JSON shape."""

    status: int
    message: str
    error_type: str = "invalid_request_error"
    code: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class DelayReply:
    """Wait before answering at all (no headers yet), then `then` (or the responder)."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class SlowFirstToken:
    """Send the headers at once, then wait before the first chunk of `then`."""

    seconds: float
    then: Step | None = None


Step = TextReply | ToolCallReply | ErrorReply | DelayReply | SlowFirstToken
Responder = Callable[[dict[str, Any]], Step | str | Awaitable[Step | str]]


def _default_responder(body: dict[str, Any]) -> Step:
    return TextReply(DEFAULT_REPLY)


class FakeOpenAIAPI:
    """An OpenAI-compatible server on 127.0.0.1; `base_url` ends in `/v1`.

    `models` maps each served model to its traits; None serves any name with full
    support. `api_key` None accepts any key (or none), like a local server.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: dict[str, ModelTraits] | None = None,
        responder: Responder | None = None,
    ) -> None:
        self.api_key = api_key
        self.models = models
        self.responder: Responder = responder or _default_responder
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self._script: deque[Step] = deque()
        self._seen_prefixes: set[str] = set()
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._port = 0

    # Script

    def queue(self, step: Step) -> None:
        """Answer the next unanswered chat request with `step`."""
        self._script.append(step)

    def queue_text(self, text: str, finish_reason: str = "stop") -> None:
        """Answer the next request with text."""
        self.queue(TextReply(text, finish_reason))

    def queue_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        text: str = "",
        finish_reason: str = "tool_calls",
    ) -> None:
        """Answer the next request with a call of `name`."""
        self.queue(ToolCallReply(name, arguments, text, finish_reason))

    def queue_error(
        self,
        status: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next request with an error."""
        kind = error_type or _error_type(status)
        self.queue(ErrorReply(status, message or f"fake {kind}", kind, None, retry_after))

    def queue_delay(self, seconds: float, then: Step | None = None) -> None:
        """Answer the next request only after `seconds` (before any header)."""
        self.queue(DelayReply(seconds, then))

    def queue_slow_first_token(self, seconds: float, then: Step | None = None) -> None:
        """Start the next answer at once but send its first token after `seconds`."""
        self.queue(SlowFirstToken(seconds, then))

    @property
    def last_request(self) -> dict[str, Any]:
        """The JSON body of the latest chat request."""
        return self.requests[-1]

    # Lifecycle

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1` once started."""
        if self._runner is None:
            raise RuntimeError("the fake OpenAI API is not running")
        return f"http://127.0.0.1:{self._port}/v1"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
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

    async def __aenter__(self) -> FakeOpenAIAPI:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # Chat completions

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.request_headers.append(dict(request.headers))
        try:
            body = await request.json()
        except ValueError:
            return _error(ErrorReply(400, "could not parse the JSON body of your request"))
        if isinstance(body, dict):
            self.requests.append(body)
        problem = self._check_key(request) or self._check_model(body) or validate(body)
        if problem is None:
            problem = self._check_support(body)
        if problem is not None:
            return _error(problem)
        step = self._script.popleft() if self._script else await self._respond(body)
        return await self._answer(step, body, request)

    def _check_key(self, request: web.Request) -> ErrorReply | None:
        if self.api_key is None:
            return None
        bearer = request.headers.get("authorization", "")
        if bearer != f"Bearer {self.api_key}":
            return ErrorReply(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        return None

    def _traits(self, model: str) -> ModelTraits | None:
        if self.models is None:
            return ModelTraits()
        return self.models.get(model)

    def _check_model(self, body: Any) -> ErrorReply | None:
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or self._traits(model) is not None:
            return None
        return ErrorReply(
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        )

    def _check_support(self, body: dict[str, Any]) -> ErrorReply | None:
        traits = self._traits(body["model"]) or ModelTraits()
        if body.get("tools") and not traits.tools:
            # Ollama's words for a model whose template has no tools.
            message = f"registry.ollama.ai/library/{body['model']} does not support tools"
            return ErrorReply(400, message, "api_error")
        if "max_tokens" in body and not traits.max_tokens:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            return ErrorReply(400, message, "invalid_request_error", "unsupported_parameter")
        response_format = body.get("response_format")
        if response_format and not traits.response_format:
            kind = response_format.get("type") if isinstance(response_format, dict) else "?"
            return ErrorReply(400, f"response_format of type {kind!r} is not supported")
        return None

    async def _respond(self, body: dict[str, Any]) -> Step:
        result = self.responder(body)
        if inspect.isawaitable(result):
            result = await result
        return TextReply(result) if isinstance(result, str) else result

    async def _answer(
        self, step: Step, body: dict[str, Any], request: web.Request
    ) -> web.StreamResponse:
        first_token_delay = 0.0
        while isinstance(step, DelayReply | SlowFirstToken):
            if isinstance(step, DelayReply):
                await self._wait(step.seconds)
            else:
                first_token_delay += step.seconds
            step = step.then or await self._respond(body)
        if isinstance(step, ErrorReply):
            return _error(step)
        choice = _as_served(step, body)
        if not body.get("stream"):
            await self._wait(first_token_delay)
            return web.json_response(self._completion(choice, body))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self._wait(first_token_delay)
        for chunk in self._chunks(choice, body):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _wait(self, seconds: float) -> None:
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=seconds)

    def _completion(self, step: TextReply | ToolCallReply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if isinstance(step, ToolCallReply):
            message["tool_calls"] = [_call(step)]
        return {
            **_envelope(body, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": step.finish_reason}],
            "usage": self._usage(body, step),
        }

    def _chunks(self, step: TextReply | ToolCallReply, body: dict[str, Any]) -> list[Any]:
        envelope = _envelope(body, "chat.completion.chunk")
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in _pieces(step.text)]
        if isinstance(step, ToolCallReply):
            call = _call(step)
            head = {**call, "function": {"name": step.name, "arguments": ""}}
            deltas.append({"tool_calls": [{"index": 0, **head}]})
            deltas += [
                {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                for piece in _pieces(call["function"]["arguments"])
            ]
        chunks = [_chunk(envelope, delta, None) for delta in deltas]
        chunks.append(_chunk(envelope, {}, step.finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**envelope, "choices": [], "usage": self._usage(body, step)})
        return chunks

    def _usage(self, body: dict[str, Any], step: TextReply | ToolCallReply) -> dict[str, Any]:
        """Tokens at 4 characters each; the system message counts as cached once seen."""
        prompt = _tokens(json.dumps(body["messages"]) + json.dumps(body.get("tools") or []))
        system = "".join(
            str(m.get("content") or "") for m in body["messages"] if m.get("role") == "system"
        )
        key = hashlib.sha256(f"{body['model']}\0{system}".encode()).hexdigest()
        cached = _tokens(system) if system and key in self._seen_prefixes else 0
        self._seen_prefixes.add(key)
        completion = _tokens(step.text + json.dumps(getattr(step, "arguments", "")))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    # Embeddings

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.embedding_requests.append(body)
        problem = self._check_key(request) or self._check_model(body)
        if problem is not None:
            return _error(problem)
        if self._script and isinstance(self._script[0], ErrorReply):
            step = self._script.popleft()
            assert isinstance(step, ErrorReply)
            return _error(step)
        traits = self._traits(body["model"]) or ModelTraits()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        width = traits.embedding_dim
        if traits.embedding_dimensions and isinstance(body.get("dimensions"), int):
            width = min(width, body["dimensions"])
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(text, width)}
            for i, text in enumerate(texts)
        ]
        tokens = sum(_tokens(text) for text in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _as_served(step: TextReply | ToolCallReply, body: dict[str, Any]) -> TextReply | ToolCallReply:
    """A tool call asked for without tools (JSON modes) comes back as JSON text."""
    if isinstance(step, ToolCallReply) and not body.get("tools"):
        arguments = step.arguments
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        finish = "length" if step.finish_reason == "length" else "stop"
        return TextReply(text, finish)
    return step


def _call(step: ToolCallReply) -> dict[str, Any]:
    arguments = step.arguments
    return {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {
            "name": step.name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": kind,
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_ollama",
    }


def _chunk(envelope: dict[str, Any], delta: dict[str, Any], finish: str | None) -> Any:
    return {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _vector(text: str, width: int) -> list[float]:
    """A deterministic vector for `text` (same text, same vector)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).standard_normal(width)]


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_exceeded"
    return "server_error" if status >= 500 else "invalid_request_error"


def _error(reply: ErrorReply) -> web.Response:
    headers = {"x-request-id": f"req_{uuid.uuid4().hex[:24]}"}
    if reply.retry_after is not None:
        headers["retry-after"] = f"{reply.retry_after:g}"
    body = {
        "error": {
            "message": reply.message,
            "type": reply.error_type,
            "param": None,
            "code": reply.code,
        }
    }
    return web.json_response(body, status=reply.status, headers=headers)


# Validation, in the words of the real servers where we know them


def validate(body: Any) -> ErrorReply | None:
    """A 400 for a request an OpenAI-compatible server would refuse."""
    if not isinstance(body, dict):
        return ErrorReply(400, "the request body must be a JSON object")
    for name in ("model", "messages"):
        if name not in body:
            return ErrorReply(400, f"Missing required parameter: '{name}'.")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return ErrorReply(400, "[] is too short - 'messages'")
    problem = _check_messages(messages) or _check_tools(body)
    return ErrorReply(400, problem) if problem else None


def _check_messages(messages: list[Any]) -> str | None:
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value for 'messages[{index}].role'."
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls' (messages[{index}])."
                )
            open_calls.remove(message["tool_call_id"])
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
        calls = message.get("tool_calls") or [] if role == "assistant" else []
        open_calls = [str(call.get("id")) for call in calls]
        if not calls and message.get("content") in (None, "") and role != "assistant":
            return f"Invalid 'messages[{index}].content': empty content."
    return None


def _check_tools(body: dict[str, Any]) -> str | None:
    names = set()
    for index, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            return f"Invalid value for 'tools[{index}].type'."
        if not isinstance(function.get("parameters", {}), dict):
            return f"Invalid type for 'tools[{index}].function.parameters'."
        if not OPENAI_NAME.match(str(function.get("name", ""))):
            return (
                f"Invalid 'tools[{index}].function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            )
        problem = schema_problem(function.get("parameters", {"type": "object"}))
        if problem is not None:
            return f"Invalid schema for function '{function['name']}': {problem}"
        names.add(function.get("name"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if name not in names:
            return f"Invalid value for 'tool_choice': function '{name}' not found in 'tools'."
    return None
