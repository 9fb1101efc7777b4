"""A private PostgreSQL cluster for the Prefect server (SQLite refuses concurrent writers: a Run
pressed while workers write got a 503). The cluster listens only on a Unix socket in a
directory of its own (mode 0700), so no TCP port can clash and no other user can connect.
PostgreSQL refuses to run as root: under root the cluster belongs to the `postgres` user that
Debian's package creates. `make postgres` installs the server binaries where they are missing."""

import glob
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

DATABASE = "prefect"
SOCKET_PORT = "5432"  # only names the socket file; the cluster opens no TCP port
INSTALL_HINT = "`make postgres` installs Debian's postgresql"


def bindir() -> Path:
    """The directory of the PostgreSQL server binaries (initdb, postgres), newest version first."""
    candidates = [os.environ.get("ARGEN_PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    found = shutil.which("postgres")
    candidates += [str(Path(found).resolve().parent)] if found else []
    for candidate in filter(None, candidates):
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "postgres").is_file():
            return Path(candidate)
    raise RuntimeError(f"no PostgreSQL server binaries (initdb, postgres) found; {INSTALL_HINT}")


def _version(path: str) -> float:
    """The major version in /usr/lib/postgresql/<major>/bin, for sorting."""
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def owner() -> pwd.struct_passwd | None:
    """The user the cluster runs as: `postgres` under root, else None (the current user)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError(
            f"running as root, and PostgreSQL refuses root: no `postgres` user; {INSTALL_HINT}"
        ) from None


def _as_owner(root: Path) -> dict:
    """Popen arguments that run a PostgreSQL program as the cluster's owner, in `root`."""
    user = owner()
    if user is None:
        return {"cwd": root}
    return {"cwd": root, "user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _private_dir(path: Path) -> Path:
    """Create `path` (mode 0700) owned by the cluster's owner."""
    path.mkdir(parents=True, exist_ok=True)
    user = owner()
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(0o700)
    return path


def _check_reachable(root: Path) -> None:
    """The owner must be able to reach `root` through its parents (pytest's temp dirs are 0700)."""
    user = owner()
    if user is None:
        return
    probe = subprocess.run(["test", "-x", str(root)], **_as_owner(Path("/")))
    if probe.returncode != 0:
        raise RuntimeError(
            f"the postgres user cannot reach {root}: choose a folder whose parents it can enter"
        )


def database_url(root: Path) -> str:
    """The SQLAlchemy URL (asyncpg driver) of the cluster's Prefect database."""
    user = owner()
    name = user.pw_name if user else pwd.getpwuid(os.geteuid()).pw_name
    return f"postgresql+asyncpg://{name}@/{DATABASE}?host={root / 'run'}"


def init_cluster(root: Path) -> None:
    """Create the cluster under ``root/data`` unless it exists (trust auth: socket only)."""
    if (root / "data" / "PG_VERSION").is_file():
        return
    _private_dir(root)
    _check_reachable(root)
    data = root / "data.tmp"
    shutil.rmtree(data, ignore_errors=True)
    subprocess.run(
        [bindir() / "initdb", "-D", data, "--auth=trust", "--encoding=UTF8", "--no-sync"],
        check=True,
        capture_output=True,
        **_as_owner(root),
    )
    data.rename(root / "data")


def start_postgres(root: Path, log: Path, timeout: float = 60) -> subprocess.Popen:
    """Start the cluster (socket only) in its own session and wait until it accepts connections."""
    init_cluster(root)
    _private_dir(root / "run")
    log.parent.mkdir(parents=True, exist_ok=True)
    handle = open(log, "ab")  # noqa: SIM115 - the child keeps it open
    proc = subprocess.Popen(
        [
            bindir() / "postgres",
            "-D",
            root / "data",
            "-c",
            "listen_addresses=",
            "-c",
            f"unix_socket_directories={root / 'run'}",
            "-p",
            SOCKET_PORT,
        ],
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **_as_owner(root),
    )
    ready = [str(bindir() / "pg_isready"), "-q", "-h", str(root / "run"), "-p", SOCKET_PORT]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited early; see {log}")
        if subprocess.run(ready, **_as_owner(root)).returncode == 0:
            _create_database(root)
            return proc
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"postgres did not accept connections within {timeout:.0f} s; see {log}")


def _create_database(root: Path) -> None:
    """Create the Prefect database unless it exists."""
    done = subprocess.run(
        [bindir() / "createdb", "-h", root / "run", "-p", SOCKET_PORT, DATABASE],
        capture_output=True,
        text=True,
        **_as_owner(root),
    )
    if done.returncode != 0 and "already exists" not in done.stderr:
        raise RuntimeError(f"createdb {DATABASE} failed: {done.stderr.strip()}")
