"""Without the ``a2a`` extra: ``import rx_agent`` and the errors still work, the server
serves without A2A (or, asked for it, says what to install), and ``A2AAgent`` says
what to install. Run in a fresh interpreter where ``a2a`` cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK = "import sys\nsys.modules['a2a'] = None  # as if a2a-sdk were not installed\n"


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_the_extra_the_errors_import_and_a2a_agent_says_what_to_install() -> None:
    out = run("""
        import rx_agent
        from rx_agent.a2a import RemoteAgentError, RemoteTaskFailedError
        assert issubclass(RemoteTaskFailedError, rx_agent.RxAgentError)
        try:
            rx_agent.A2AAgent("http://127.0.0.1:9", name="x")
        except ImportError as exc:
            print(exc)
    """)
    assert "pip install 'rx-agent[a2a]'" in out


def test_without_the_extra_the_server_runs_without_a2a_unless_it_is_required() -> None:
    out = run("""
        from starlette.testclient import TestClient
        from rx_agent import ReActAgent, ScriptedModel
        from rx_agent.serve import create_app
        agent = ReActAgent(name="a", model=ScriptedModel(["hi"]))
        client = TestClient(create_app(agent))
        print(client.get("/.well-known/agent-card.json").status_code)
        print("/a2a" in client.get("/openapi.json").json()["paths"])
        try:
            create_app(agent, a2a=True)
        except ImportError as exc:
            print(exc)
    """)
    lines = out.splitlines()
    assert lines[:2] == ["404", "False"]
    assert "create_app(a2a=True) needs the a2a extra" in lines[2]
    assert "pip install 'rx-agent[a2a]'" in lines[2]


def test_a2a_must_be_a_bool_or_none() -> None:
    import pytest

    from rx_agent import ReActAgent, ScriptedModel
    from rx_agent.serve import create_app

    with pytest.raises(TypeError, match="a2a must be True, False or None"):
        create_app(ReActAgent(name="a", model=ScriptedModel(["hi"])), a2a="yes")  # type: ignore[arg-type]
