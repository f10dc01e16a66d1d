#!/usr/bin/env python3
"""Create the AgentScope peer environment and run the peer benchmark in it.

Standard library only, so the benchmark runner can import it from any Python:

    from benchmarks.peer.setup_peer import ensure_peer_venv, run_peer

    python = ensure_peer_venv("/work/peer-venv")
    report = run_peer(python, workload="stream", n_mw=10, flavour="op")

``ensure_peer_venv`` is idempotent: when the venv already holds the pinned
AgentScope version it returns at once (one short subprocess). ``run_peer``
runs ``agentscope_peer.py`` (beside this file) with that Python and returns
the JSON object it prints.

As a script: ``python setup_peer.py --venv DIR`` creates (or checks) the venv
and prints its Python; add ``--smoke`` to also run a tiny benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any, Final

#: The AgentScope release the peer script was written against and verified on.
AGENTSCOPE_VERSION: Final = "2.0.11"
#: The peer benchmark script, run with the venv's Python.
PEER_SCRIPT: Final = Path(__file__).resolve().with_name("agentscope_peer.py")

_INSTALL_TIMEOUT_S: Final = 1800.0
_PROBE_TIMEOUT_S: Final = 60.0


class PeerSetupError(RuntimeError):
    """The peer venv could not be created, installed into, or run."""


def venv_python(path: str | os.PathLike[str]) -> Path:
    """The interpreter of the venv at ``path`` (which may not exist yet)."""
    root = Path(path)
    if os.name == "nt":
        return root / "Scripts" / "python.exe"
    return root / "bin" / "python"


def _clean_env() -> dict[str, str]:
    """The environment for peer subprocesses: ours, minus what could leak the
    runner's packages (e.g. ``rx_agent`` on ``PYTHONPATH``) into the peer."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def installed_version(python: str | os.PathLike[str]) -> str | None:
    """The ``agentscope`` version installed for ``python``, or ``None``."""
    probe = (
        "import importlib.metadata as m\n"
        "try:\n"
        "    print(m.version('agentscope'))\n"
        "except m.PackageNotFoundError:\n"
        "    pass\n"
    )
    try:
        proc = subprocess.run(
            [os.fspath(python), "-c", probe],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            env=_clean_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_peer_venv(path: str | os.PathLike[str], *, quiet: bool = True) -> Path:
    """Make sure a venv at ``path`` has ``agentscope==AGENTSCOPE_VERSION``.

    Creates the venv if it is missing (or has no working interpreter) and
    installs the pinned AgentScope into it with pip. Returns the venv's
    Python. Quick when everything is already in place.

    Raises:
        PeerSetupError: if the venv can't be created, pip fails, or the
            installed version still doesn't match afterwards.
    """
    root = Path(path).expanduser().absolute()
    python = venv_python(root)
    if python.exists() and installed_version(python) == AGENTSCOPE_VERSION:
        return python

    if not python.exists() or not _pip_works(python):
        # Never ``clear``: ``path`` might be a directory the caller cares about.
        try:
            venv.EnvBuilder(with_pip=True).create(root)
        except Exception as exc:
            raise PeerSetupError(f"could not create the peer venv at {root}: {exc}") from exc
        if not python.exists():
            raise PeerSetupError(f"venv created at {root} but {python} is missing")

    cmd = [
        os.fspath(python),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        f"agentscope=={AGENTSCOPE_VERSION}",
    ]
    if quiet:
        cmd.insert(4, "--quiet")
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            env=_clean_env(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerSetupError(
            f"pip install agentscope=={AGENTSCOPE_VERSION} timed out after "
            f"{_INSTALL_TIMEOUT_S:.0f}s"
        ) from exc
    if proc.returncode != 0:
        raise PeerSetupError(
            f"pip install agentscope=={AGENTSCOPE_VERSION} into {root} failed "
            f"(exit {proc.returncode}):\n{_tail(proc.stderr or proc.stdout)}"
        )

    found = installed_version(python)
    if found != AGENTSCOPE_VERSION:
        raise PeerSetupError(
            f"after installing, {python} reports agentscope {found!r}, "
            f"expected {AGENTSCOPE_VERSION!r}"
        )
    return python


def _pip_works(python: Path) -> bool:
    """Whether ``python -m pip`` runs (a half-created venv may lack pip)."""
    try:
        proc = subprocess.run(
            [os.fspath(python), "-m", "pip", "--version"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            env=_clean_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def peer_argv(**params: Any) -> list[str]:
    """CLI flags for ``agentscope_peer.py`` from keyword parameters.

    ``n_mw=10`` becomes ``--n-mw 10``; ``None`` values are left out (the
    script's default applies); ``True`` becomes a bare flag.
    """
    argv: list[str] = []
    for key, value in params.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv.extend([flag, str(value)])
    return argv


def run_peer(
    python: str | os.PathLike[str],
    *,
    timeout: float = 900.0,
    **params: Any,
) -> dict[str, Any]:
    """Run the peer benchmark with ``python`` and return its JSON report.

    Args:
        python: The peer venv's interpreter (see ``ensure_peer_venv``).
        timeout: Seconds before the run is abandoned.
        **params: The script's options, e.g. ``workload="stream"``,
            ``n_mw=5``, ``flavour="op"``, ``events=10_000``, ``rounds=10``,
            ``repeats=5``, ``warmup=1``.

    Raises:
        PeerSetupError: if the script fails, times out or prints no JSON.
    """
    cmd = [os.fspath(python), os.fspath(PEER_SCRIPT), *peer_argv(**params)]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_clean_env(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerSetupError(f"peer run timed out after {timeout:.0f}s: {cmd}") from exc
    if proc.returncode != 0:
        raise PeerSetupError(
            f"peer run failed (exit {proc.returncode}): {cmd}\n{_tail(proc.stderr)}"
        )
    # The script prints one JSON object; take the last JSON-looking line in
    # case something else ever writes to stdout first.
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except json.JSONDecodeError:
                break
            if isinstance(report, dict):
                return report
            break
    raise PeerSetupError(
        f"peer run printed no JSON object: {cmd}\nstdout:\n{_tail(proc.stdout)}\n"
        f"stderr:\n{_tail(proc.stderr)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create the AgentScope peer venv.")
    parser.add_argument("--venv", required=True, help="directory of the peer venv")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="also run a tiny stream benchmark and print its JSON report",
    )
    args = parser.parse_args(argv)
    try:
        python = ensure_peer_venv(args.venv, quiet=False)
        print(f"agentscope {AGENTSCOPE_VERSION} ready: {python}", file=sys.stderr)
        print(python)
        if args.smoke:
            report = run_peer(python, workload="stream", events=200, repeats=1, warmup=0)
            print(json.dumps(report))
    except PeerSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
