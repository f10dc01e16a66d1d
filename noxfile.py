"""Automation: ``nox -s tests``, ``nox -s lint``, ``nox -s demo``, ``nox -s docs``, ``nox -s bench``."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (what CI runs)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "rx_agent", "tests", "examples", "benchmarks")
    session.run("mypy", "rx_agent", "tests/typing")


@nox.session
def demo(session: nox.Session) -> None:
    """The offline demo on the embedded scripted model."""
    session.install("-e", ".[cli]")
    session.run("python", "-m", "rx_agent", "demo", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with --strict."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site")


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite (``-- --smoke`` for the quick CI version)."""
    session.install("-e", ".")
    session.run("python", "benchmarks/run.py", *session.posargs)
