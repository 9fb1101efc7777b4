"""A local Prefect server with the UI, both work pools, the deployments and a worker per pool.

    python -m flows.server [--port 4200] [--home .prefect]      (what `make server` runs)

The server binds to 127.0.0.1 unless --host says otherwise. Its database is PostgreSQL: the
one PREFECT_API_DATABASE_CONNECTION_URL names, else a private cluster under HOME/postgres
(flows.postgres). SQLite stays for ephemeral runs only (`argen run` without a server): it
refuses a write while workers write, and a Run pressed then failed with a 503.
The tests use the same functions.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flows.postgres import database_url, start_postgres

PROJECT_DIR = Path(__file__).resolve().parent.parent
POOLS = ("cpu", "gpu")
# Flow runs the gpu pool runs at once: one per GPU of its worker's machine.
GPU_SLOTS = int(os.environ.get("ARGEN_GPU_SLOTS", "1"))
DATABASE_SETTINGS = (
    "PREFECT_API_DATABASE_CONNECTION_URL",
    "PREFECT_SERVER_DATABASE_CONNECTION_URL",
)


def prefect_env(
    home: Path,
    port: int,
    host: str = "127.0.0.1",
    fast_polling: bool = False,
    base: dict | None = None,
) -> dict:
    """Environment for the server, the CLI and the workers of one local Prefect setup."""
    env = dict(base or os.environ)
    env.update(
        {
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": f"http://{host}:{port}/api",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_API_HOST": host,
            "PREFECT_SERVER_API_PORT": str(port),
            "PREFECT_LOGGING_EXTRA_LOGGERS": "argen",
            "ARGEN_PROJECT_DIR": str(PROJECT_DIR),
        }
    )
    if fast_polling:
        env.update({"PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_WORKER_PREFETCH_SECONDS": "1"})
    return env


def prefect_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prefect", *args],
        env=env,
        cwd=PROJECT_DIR,
        check=True,
        capture_output=True,
        text=True,
    )


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """A long-running Prefect process in its own session (so it can be stopped as a group)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    handle = open(log, "ab")  # noqa: SIM115 - the child keeps it open
    return subprocess.Popen(
        [sys.executable, "-m", "prefect", *args],
        env=env,
        cwd=PROJECT_DIR,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_server(env: dict, log: Path, timeout: float = 120) -> subprocess.Popen:
    """Start the server and wait until its health endpoint answers."""
    proc = start(
        [
            "server",
            "start",
            "--host",
            env["PREFECT_SERVER_API_HOST"],
            "--port",
            env["PREFECT_SERVER_API_PORT"],
        ],
        env,
        log,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited early; see {log}")
        try:
            with urllib.request.urlopen(env["PREFECT_API_URL"] + "/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"prefect server did not answer within {timeout:.0f} s; see {log}")


def start_database(env: dict, root: Path, log: Path) -> subprocess.Popen | None:
    """Point `env` at PostgreSQL: the database it already names, else a private cluster in `root`
    (started here; the caller stops it after the server)."""
    if any(env.get(name, "").startswith("postgresql") for name in DATABASE_SETTINGS):
        return None
    for name in DATABASE_SETTINGS:
        if env.get(name):
            raise RuntimeError(f"{name} must name a PostgreSQL database (postgresql+asyncpg://)")
    proc = start_postgres(root, log)
    env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url(root)
    return proc


def create_pools_and_deploy(env: dict) -> None:
    """A process work pool per name in POOLS (the gpu pool limited to GPU_SLOTS runs at once),
    then every deployment of prefect.yaml."""
    for pool in POOLS:
        prefect_cli("work-pool", "create", pool, "--type", "process", "--overwrite", env=env)
    prefect_cli("work-pool", "set-concurrency-limit", "gpu", str(GPU_SLOTS), env=env)
    prefect_cli("--no-prompt", "deploy", "--all", env=env)


def start_worker(pool: str, env: dict, log: Path) -> subprocess.Popen:
    return start(["worker", "start", "--pool", pool, "--type", "process"], env, log)


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Stop a process group started by `start`: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=4200)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--home", type=Path, default=PROJECT_DIR / ".prefect")
    args = parser.parse_args()
    home = args.home.resolve()
    env = prefect_env(home, args.port, args.host)
    logs = home / "logs"
    database = start_database(env, home / "postgres", logs / "postgres.log")
    procs = [database] if database else []
    try:
        procs.append(start_server(env, logs / "server.log"))
        create_pools_and_deploy(env)
        procs += [start_worker(pool, env, logs / f"worker-{pool}.log") for pool in POOLS]
        sys.stdout.write(
            f"Prefect UI: http://{args.host}:{args.port}  (logs in {logs}; "
            "Ctrl-C stops the server and workers)\n"
        )
        sys.stdout.flush()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        for proc in reversed(procs):
            stop(proc)


if __name__ == "__main__":
    main()
