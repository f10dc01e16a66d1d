"""Create each peer's virtual environment, pinned from PyPI (stdlib only).

    python benchmarks/peers/setup.py                      # every peer
    python benchmarks/peers/setup.py --peers langchain    # just one

Each venv lives under ``~/.cache/rx_agent-bench/<peer>`` (``--cache-dir`` or
``RX_AGENT_BENCH_CACHE`` to move it). ``ensure_venv`` is idempotent: when the venv already
holds the pinned versions it returns at once (one short probe subprocess).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Final

#: What each peer installs, exact versions; the workers were written against these.
PINS: Final[dict[str, tuple[str, ...]]] = {
    "agentscope": ("agentscope==2.0.11",),
    "langchain": ("langchain==1.5.0", "langchain-core==1.8.3", "langgraph==1.2.24"),
    "pydantic_ai": ("pydantic-ai-slim==2.68.0",),
}
PEERS: Final = tuple(PINS)

_INSTALL_TIMEOUT_S: Final = 1800.0
_PROBE_TIMEOUT_S: Final = 60.0


class SetupError(RuntimeError):
    """A peer venv could not be created or installed into."""


def cache_dir(path: str | os.PathLike[str] | None = None) -> Path:
    chosen = path or os.environ.get("RX_AGENT_BENCH_CACHE") or "~/.cache/rx_agent-bench"
    return Path(chosen).expanduser().absolute()


def venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def clean_env() -> dict[str, str]:
    """Our environment minus what could leak our packages (``PYTHONPATH``) into a peer."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"
    # No tracing or telemetry in any peer: LangSmith, OpenTelemetry, Logfire stay off.
    env.update(LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false",
               OTEL_SDK_DISABLED="true", LOGFIRE_SEND_TO_LOGFIRE="false")
    return env


def installed(python: Path, names: list[str]) -> dict[str, str | None]:
    """The installed version of each distribution for ``python`` (``None``: missing)."""
    probe = ("import importlib.metadata as m, json, sys\n"
             "def v(n):\n"
             "    try:\n        return m.version(n)\n"
             "    except m.PackageNotFoundError:\n        return None\n"
             "print(json.dumps({n: v(n) for n in sys.argv[1:]}))\n")
    try:
        done = subprocess.run([os.fspath(python), "-c", probe, *names], capture_output=True,
                              text=True, timeout=_PROBE_TIMEOUT_S, env=clean_env(), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return dict.fromkeys(names)
    if done.returncode != 0:
        return dict.fromkeys(names)
    found: dict[str, str | None] = json.loads(done.stdout)
    return found


def _pinned(peer: str) -> dict[str, str]:
    return dict(spec.split("==", 1) for spec in PINS[peer])


def ensure_venv(peer: str, root: str | os.PathLike[str] | None = None, *,
                quiet: bool = True) -> Path:
    """The Python of ``peer``'s venv, created and installed from PyPI if needed."""
    if peer not in PINS:
        raise SetupError(f"unknown peer {peer!r}; expected one of {', '.join(PEERS)}")
    home = cache_dir(root) / peer
    python = venv_python(home)
    want = _pinned(peer)
    if python.exists() and installed(python, list(want)) == want:
        return python
    if not python.exists():
        try:
            venv.EnvBuilder(with_pip=True).create(home)
        except Exception as exc:
            raise SetupError(f"could not create the {peer} venv at {home}: {exc}") from exc
    cmd = [os.fspath(python), "-m", "pip", "install", "--disable-pip-version-check",
           "--no-input", *(["--quiet"] if quiet else []), *PINS[peer]]
    try:
        done = subprocess.run(cmd, capture_output=quiet, text=True, env=clean_env(),
                              timeout=_INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"pip install {' '.join(PINS[peer])} timed out") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or "").strip().splitlines()[-20:])
        raise SetupError(f"pip install {' '.join(PINS[peer])} into {home} failed "
                         f"(exit {done.returncode}):\n{tail}")
    found = installed(python, list(want))
    if found != want:
        raise SetupError(f"{home} holds {found} after installing; expected {want}")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create the peer benchmark venvs.")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated, from {','.join(PEERS)}")
    parser.add_argument("--cache-dir", default=None, help="default ~/.cache/rx_agent-bench")
    args = parser.parse_args(argv)
    status = 0
    for peer in filter(None, args.peers.split(",")):
        try:
            print(f"{peer}: {ensure_venv(peer, args.cache_dir, quiet=False)}")
        except SetupError as exc:
            print(f"{peer}: error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
