"""The LLM judge over any OpenAI-compatible endpoint, through the official `openai` client.

Transport faults (429 with Retry-After, 5xx, timeouts, dropped connections) are retried by the
client itself. Answers that are not valid JSON of the expected shape, or refusals, are re-asked
with the problem stated, up to `invalid_retries` times; a reply that is not a chat completion at
all (an HTML page with status 200, JSON cut off mid-body: a `base_url` naming a plain web
server) is asked again the same way. After that the item is a `JudgeFailure`. Any other
exception (a bug, not a judge fault) propagates.

The client's connection pool belongs to one event loop, so the judge owns one: a daemon thread
runs it for the judge's whole life, and `judge_many`, awaited from any caller's loop (one
``asyncio.run`` per evaluation chunk, validation, TRL's reward loop), runs its work there.
"""

import asyncio
import functools
import logging
import os
import threading
import weakref
from collections.abc import Coroutine, Mapping, Sequence

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import BaseModel, ValidationError

from argen.config import JudgeConfig
from argen.errors import ArgenError, short
from argen.judging import prompts
from argen.judging.base import JudgeFailure, redact

log = logging.getLogger(__name__)


class InvalidReply(Exception):
    """A reply that is not a chat completion: asked again, then a failure like an invalid one."""


class RateLimiter:
    """Spaces request starts at least 60 / `per_minute` seconds apart (None: no limit)."""

    def __init__(self, per_minute: float | None):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self._next = 0.0

    async def wait(self) -> None:
        if not self.interval:
            return
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


class JudgeLoop:
    """An event loop in a daemon thread, started on first use, on which the client always runs."""

    def __init__(self, client: openai.AsyncOpenAI, name: str):
        self.client = client
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, work: Coroutine):
        """Schedule `work` on the judge's loop; an awaitable for the caller's own loop."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=_run_until_stopped, args=(self._loop,), name=self.name, daemon=True
                )
                self._thread.start()
            future = asyncio.run_coroutine_threadsafe(work, self._loop)
        return asyncio.wrap_future(future)

    def close(self) -> None:
        """Close the client's connections on their own loop, then stop the loop's thread."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread or _on_a_running_loop():
            # Freed by garbage collection inside some loop's work (its own, or another judge's):
            # waiting here would block that loop, and two judges' loops can wait on each other.
            closing = asyncio.run_coroutine_threadsafe(self.client.close(), loop)
            closing.add_done_callback(lambda _: loop.call_soon_threadsafe(loop.stop))
            return
        try:
            asyncio.run_coroutine_threadsafe(self.client.close(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


def _on_a_running_loop() -> bool:
    """Whether this thread is running an event loop right now (so it must not block)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    """The judge thread's body: serve the loop until `JudgeLoop.close` stops it."""
    try:
        loop.run_forever()
    finally:
        loop.close()


class OpenAIJudge:
    """Judge backend for OpenAI, vLLM, Ollama or any server speaking the chat completions API."""

    def __init__(self, config: JudgeConfig):
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ArgenError(
                f"the openai judge needs an API key in the environment variable "
                f"{config.api_key_env} (set judge.api_key_env to use another variable)"
            )
        self.config = config
        self._key = key
        self.client = openai.AsyncOpenAI(
            api_key=key,
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
        )
        self.name = f"openai/{config.model}"
        self.identity = {
            "backend": "openai",
            "model": config.model,
            "base_url": str(self.client.base_url),
            "mode": config.mode,
            "seed": config.seed,
            "temperature": 0,
        }
        self._response_format = config.response_format
        self._limit = RateLimiter(config.requests_per_minute)
        self._slots: asyncio.Semaphore | None = None
        self._runner = JudgeLoop(self.client, f"argen-judge-{config.model}")
        self._finalizer = weakref.finalize(self, self._runner.close)

    async def judge_many(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        """Judge every pair on the judge's own loop, whichever loop awaits this."""
        return await self._runner.submit(self._judge_all(pairs))

    def close(self) -> None:
        """Release the connections and the loop's thread (also done when the judge is freed)."""
        self._finalizer()

    async def _judge_all(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        """Runs on the judge's loop: at most `concurrency` requests in flight over all calls."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.concurrency)
        return await asyncio.gather(*(self._judge_one(p, r) for p, r in pairs))

    async def _judge_one(self, prompt: str, response: str) -> Mapping | JudgeFailure:
        requests = (
            [prompts.COMBINED_REQUEST]
            if self.config.mode == "combined"
            else list(prompts.DIMENSION_REQUESTS.values())
        )
        try:
            parts = await asyncio.gather(
                *(self._ask(text, schema, prompt, response) for text, schema in requests)
            )
        except JudgeFailure as failure:
            return JudgeFailure(redact(str(failure), [self._key]))
        merged: dict = {}
        for part in parts:
            merged.update(part.model_dump())
        return merged

    async def _ask(
        self, instructions: str, schema: type[BaseModel], prompt: str, response: str
    ) -> BaseModel:
        """One judgement request, re-asked while the answer is not valid for `schema`."""
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": prompts.SYSTEM},
            {"role": "user", "content": prompts.user_message(instructions, prompt, response)},
        ]
        problem = ""
        for _ in range(self.config.invalid_retries + 1):
            try:
                content = await self._complete(messages, schema)
            except InvalidReply as exc:
                problem = str(exc)
                log.debug("malformed judge reply (%s); asking again", problem)
                continue
            if content is None:
                problem = "the judge refused or returned no content"
            else:
                try:
                    return schema.model_validate_json(content)
                except ValidationError as exc:
                    problem = _summarize(exc)
            log.debug("invalid judge answer (%s); asking again", redact(problem, [self._key]))
            messages = [
                *messages[:2],
                {"role": "assistant", "content": content or ""},
                {
                    "role": "user",
                    "content": f"That answer was invalid ({problem}). "
                    "Reply again with only the JSON object and every field.",
                },
            ]
        raise JudgeFailure(
            f"invalid judge answer after {self.config.invalid_retries + 1} attempts: {problem}"
        )

    async def _complete(
        self, messages: list[ChatCompletionMessageParam], schema: type[BaseModel]
    ) -> str | None:
        """One chat completion; API errors left after the client's retries become failures."""
        assert self._slots is not None
        async with self._slots:
            await self._limit.wait()
            try:
                reply = await self._create(messages, schema)
            except openai.BadRequestError as exc:
                if self._response_format != "json_schema":
                    raise JudgeFailure(f"bad request: {exc.message}") from None
                log.warning("server refused json_schema output; using json_object instead")
                self._response_format = "json_object"
                try:
                    reply = await self._create(messages, schema)
                except openai.APIError as again:
                    raise JudgeFailure(_describe(again)) from None
            except openai.APIError as exc:
                raise JudgeFailure(_describe(exc)) from None
        if not reply.choices:
            return None
        message = reply.choices[0].message
        if getattr(message, "refusal", None):
            return None
        if message.content is not None and not isinstance(message.content, str):
            raise InvalidReply(f"the reply's content is not text (got {short(message.content)})")
        return message.content

    async def _create(
        self, messages: list[ChatCompletionMessageParam], schema: type[BaseModel]
    ) -> ChatCompletion:
        """One request; a reply that is not a chat completion is an `InvalidReply`."""
        try:
            reply = await self.client.chat.completions.create(
                model=self.config.model,
                messages=messages,
                temperature=0,
                seed=self.config.seed,
                response_format=self._format_for(schema),
            )
        except ValueError as exc:  # a 200 whose JSON does not parse (json.JSONDecodeError)
            raise InvalidReply(f"the server's reply is not JSON: {short(str(exc), 80)}") from None
        if not isinstance(reply, ChatCompletion) or not isinstance(reply.choices, list):
            raise InvalidReply(f"the server's reply is not a chat completion: {short(reply, 80)}")
        for choice in reply.choices:
            if not hasattr(choice, "message") or choice.message is None:
                raise InvalidReply("the server's reply has a choice without a message")
        return reply

    def _format_for(self, schema: type[BaseModel]) -> ResponseFormat:
        if self._response_format == "json_object":
            return {"type": "json_object"}
        return _json_schema_format(schema)


@functools.cache
def _json_schema_format(schema: type[BaseModel]) -> ResponseFormatJSONSchema:
    """The ``json_schema`` response format for a judgement model (built once per model)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
    }


def _summarize(exc: ValidationError) -> str:
    errors = exc.errors()
    parts = [f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in errors[:4]]
    return "; ".join(parts)


def _describe(exc: openai.APIError) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' {status}' if status else ''}: {exc.message}"
