"""A throwaway PostgreSQL cluster on a loopback port, for tests and benchmarks.

The server is the operating system's (Debian's ``postgresql``: ``initdb`` and
``postgres`` under ``/usr/lib/postgresql/*/bin``, or on PATH). PostgreSQL refuses to
run as root, so under root it runs as the ``postgres`` user the package creates.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ClusterUnavailable", "postgres_bindir", "postgres_cluster"]


class ClusterUnavailable(RuntimeError):
    """What is missing to start a cluster (the message says what to install)."""


def postgres_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``, newest version first."""
    found = shutil.which("initdb")
    if found and (Path(found).parent / "postgres").exists():
        return Path(found).parent
    versions = [p for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")
                if p.parts[-3].isdigit()]
    versions.sort(key=lambda p: int(p.parts[-3]), reverse=True)
    return versions[0].parent if versions else None


def _run_as(workdir: Path) -> list[str]:
    """The command prefix that runs the server's programs, letting them into ``workdir``."""
    if os.geteuid() != 0:
        return []
    import pwd

    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterUnavailable("PostgreSQL refuses to run as root and there is no "
                                 "'postgres' user: apt-get install postgresql creates it") from None
    top = Path(tempfile.gettempdir())
    for folder in (workdir, *workdir.parents):  # pytest's base folder is 0700
        if folder == top:
            break
        os.chmod(folder, os.stat(folder).st_mode | 0o711)
    os.chown(workdir, user.pw_uid, user.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


@contextmanager
def postgres_cluster(workdir: Path, *, durable: bool = False) -> Iterator[str]:
    """Start a cluster in ``workdir`` (trust auth for ``rx`` on 127.0.0.1) and yield its
    URL; stop it afterwards. ``durable=False`` turns ``fsync`` off (tests); benchmarks
    pass ``True`` to measure commits as a real server makes them."""
    try:
        import psycopg
    except ImportError:
        raise ClusterUnavailable("psycopg is missing: pip install -e '.[postgres]'") from None
    bindir = postgres_bindir()
    if bindir is None:
        raise ClusterUnavailable("no PostgreSQL server found: apt-get install postgresql")
    as_user = _run_as(workdir)
    data = workdir / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "rx",
                    "--auth=trust", "-E", "UTF8", "--no-sync"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = [] if durable else ["-c", "fsync=off"]
    log_path = workdir / "postgres.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*as_user, str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p",
             str(port), "-k", str(workdir), "-c", "max_connections=200", *options],
            stdout=log, stderr=subprocess.STDOUT)
        url = f"postgresql://rx@127.0.0.1:{port}/postgres"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    psycopg.connect(url, connect_timeout=1).close()
                    break
                except psycopg.OperationalError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.flush()
                        raise RuntimeError(f"PostgreSQL ({bindir}) did not start: "
                                           f"{log_path.read_text()[-2000:]}") from None
                    time.sleep(0.05)
            yield url
        finally:
            # SIGTERM: the one runuser passes on; a "smart" shutdown, so a client still
            # connected past the 10 s gets the server killed.
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
