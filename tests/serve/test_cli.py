"""`rx-agent serve`: what it refuses, the extra it needs, and building the worker app."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from rx_agent.cli import main
from rx_agent.serve._cli import CONFIG_ENV, ServeConfig, ServeError, build_app, worker_app

TESTS = Path(__file__).resolve().parent.parent

AGENT_MODULE = '''
from rx_agent import ReActAgent, ScriptedModel
agent = ReActAgent(name="fixed", model=ScriptedModel(["hi"]))
def no_store():
    return ReActAgent(name="plain", model=ScriptedModel(["hi"]))
def not_an_agent(store):
    return 42
number = 7
'''


@pytest.fixture
def collector() -> Any:
    """The collector's settings as the test found them, restored after (the worker app
    tunes them for its process: here, the test run's)."""
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


@pytest.fixture
def target_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "served_here.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RX_AGENT_TOKEN", raising=False)
    yield tmp_path
    sys.modules.pop("served_here", None)


@pytest.mark.parametrize(("args", "message"), [
    (["nowhere_module:x"], "cannot import 'nowhere_module'"),
    (["served_here"], "expected MODULE:ATTR"),
    (["served_here:missing"], "has no attribute 'missing'"),
    (["served_here:number"], "is a int, not a ReActAgent"),
    (["served_here:agent", "--store", "memory://"], "--store needs ATTR to be a factory"),
    (["served_here:no_store", "--store", "memory://"], "takes no session store"),
    (["served_here:not_an_agent"], "returned a int"),
    (["served_here:agent", "--store", "bogus"], "--store needs ATTR"),
    (["serve.served_agents:build_echo", "--store", "bogus"], "not a session store URL"),
    (["served_here:agent", "--workers", "0"], "--workers must be at least 1"),
    (["served_here:agent", "--token", "short"], "at least 8 characters"),
    (["served_here:agent", "--tokens", "missing.json"], "cannot read the tokens file"),
])
def test_serve_reports_bad_settings_in_one_line(
    target_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    args: list[str], message: str,
) -> None:
    monkeypatch.syspath_prepend(str(TESTS))
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rx-agent: error: ") and message in err, err
    assert err.count("\n") == 1


def test_the_worker_app_is_built_from_the_parents_settings(
    target_dir: Path, monkeypatch: pytest.MonkeyPatch, live: Any, collector: Any
) -> None:
    config = ServeConfig(target="served_here:no_store", tokens={"worker-token-1": "ann"})
    monkeypatch.setenv(CONFIG_ENV, json.dumps(config.__dict__))
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    app = worker_app()
    # The server's process: what it loaded is frozen, young collections are rarer.
    assert gc.get_freeze_count() > 0 and gc.get_threshold() == (50_000, 20, 20)
    server = live(app)
    r = httpx.post(server.url + "/v1/sessions/x/messages", json={"message": "hey"},
                   headers={"Authorization": "Bearer worker-token-1",
                            "Accept": "application/json"})
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "hi"
    monkeypatch.delenv(CONFIG_ENV)
    with pytest.raises(ServeError, match="rx-agent serve"):
        worker_app()
    assert build_app(ServeConfig(target="served_here:agent")).state.service.agent.name == "fixed"


def test_without_the_extra_the_error_names_the_install_command() -> None:
    code = ("import sys; sys.modules['starlette'] = None\n"
            "import rx_agent, rx_agent.cli\n"
            "assert 'uvicorn' not in sys.modules\n"
            "try:\n    import rx_agent.serve\n"
            "except ImportError as exc:\n    print(exc)\n"
            "sys.exit(rx_agent.cli.main(['serve', 'x:y']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert "pip install 'rx-agent[serve]'" in done.stdout, done.stderr
    assert done.returncode == 1 and "rx-agent[serve]" in done.stderr


def test_importing_rx_agent_does_not_import_the_server() -> None:
    code = "import sys, rx_agent, rx_agent.cli; print('starlette' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "False"
