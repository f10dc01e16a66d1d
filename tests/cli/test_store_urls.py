"""Store URLs as the commands take them: ``chat --store``, ``sessions --store``,
``$RX_AGENT_STORE`` and ``serve --store`` refuse the same malformed URLs with status 2,
and a SQLite URL never creates more than the file's own missing folder."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from rx_agent.cli import main


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
        lines: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str, *needles: str) -> None:
    assert err.startswith("rx-agent: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


CHAT = ("chat", "--offline", "--delay", "0", "--session", "s")
COMMANDS = {
    "chat": CHAT,
    "sessions list": ("sessions", "list"),
    "sessions show": ("sessions", "show", "s"),
    "sessions delete": ("sessions", "delete", "s"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("url", "needle"), [
    ("sqlite:/x.db", "write sqlite:///x.db for x.db in the working directory, or "
                     "sqlite:////x.db for /x.db"),
    ("redis://127.0.0.1:1/abc", "the path is the database number"),
    ("sqlite://x.db", "write sqlite:///x.db"),
])
def test_a_malformed_url_is_refused_before_anything_opens(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    command: str, url: str, needle: str,
) -> None:
    if url.startswith("redis"):
        pytest.importorskip("redis", reason="pip install -e '.[redis]'")
    monkeypatch.chdir(tmp_path)
    argv = COMMANDS[command]
    code, out, err = run(capsys, monkeypatch, *argv, "--store", url, lines="hi\n")
    assert (code, out) == (2, "")
    one_line(err, "bad session store (--store)", needle)
    # The same URL from the environment.
    monkeypatch.setenv("RX_AGENT_STORE", url)
    code, out, err = run(capsys, monkeypatch, *argv, lines="hi\n")
    assert (code, out) == (2, "")
    one_line(err, "bad session store ($RX_AGENT_STORE)", needle)
    assert list(tmp_path.iterdir()) == []  # no file, no folder


def test_chat_creates_the_files_own_folder_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deep = tmp_path / "nonexistent-dir" / "x" / "y.db"
    code, out, err = run(capsys, monkeypatch, *CHAT, "--store", f"sqlite:///{deep}",
                         lines="weather in Paris?\n")
    assert (code, out) == (2, "")
    one_line(err, "bad session store (--store)",
             f"the directory {tmp_path / 'nonexistent-dir'} does not exist",
             f"mkdir -p {deep.parent}")
    assert not (tmp_path / "nonexistent-dir").exists()

    shallow = tmp_path / "data" / "y.db"
    code, out, err = run(capsys, monkeypatch, *CHAT, "--store", f"sqlite:///{shallow}",
                         lines="weather in Paris?\n")
    assert (code, err) == (0, "")
    assert shallow.is_file() and "Right now in Paris" in out


def test_sessions_never_create_a_folder(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for path in (tmp_path / "data" / "y.db", tmp_path / "a" / "b" / "y.db"):
        code, _, err = run(capsys, monkeypatch, "sessions", "list", "--store",
                           f"sqlite:///{path}")
        assert code == 2
        one_line(err, f"no session database at {path}")
    assert list(tmp_path.iterdir()) == []


def test_the_default_file_gets_every_folder_it_needs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The documented default location is ours to make, however deep (a fresh account
    # may have no ~/.local/share yet).
    home = tmp_path / "fresh" / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    code, _, err = run(capsys, monkeypatch, *CHAT, lines="hi\n")
    assert (code, err) == (0, "")
    assert (home / "rx-agent" / "sessions.db").is_file()


def test_serve_store_follows_the_same_rules(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("starlette", reason="rx-agent serve needs the serve extra")
    (tmp_path / "store_urls_factory.py").write_text(
        "from rx_agent import ReActAgent, ScriptedModel\n"
        "def build(store):\n"
        "    return ReActAgent(name='s', model=ScriptedModel([]), session_store=store)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RX_AGENT_TOKEN", raising=False)
    try:
        for url, needle in [
            ("sqlite:/x.db", "write sqlite:///x.db for x.db in the working directory"),
            (f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}",
             f"the directory {tmp_path / 'no'} does not exist"),
        ]:
            code, out, err = run(capsys, monkeypatch, "serve", "store_urls_factory:build",
                                 "--store", url)
            assert (code, out) == (2, "")
            one_line(err, "--store: ", needle)
        assert not (tmp_path / "no").exists()
    finally:
        sys.modules.pop("store_urls_factory", None)


def test_a_registered_scheme_works_in_every_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    from rx_agent.session import _url

    monkeypatch.setattr(_url, "_registry", dict(_url._registry))
    monkeypatch.setattr(_url, "_order", list(_url._order))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    import json_file_store

    _url.register_store_scheme("jsonfile", json_file_store.open_json_store,
                               forms=("jsonfile:///path/to/folder",),
                               local_path=lambda u: u.partition("://")[2], replace=True)
    url = f"jsonfile://{tmp_path}/js"
    # A reading command never creates the folder the URL names.
    code, out, err = run(capsys, monkeypatch, "sessions", "list", "--store", url)
    assert (code, out) == (2, "")
    one_line(err, f"no session database at {tmp_path}/js")
    assert not (tmp_path / "js").exists()
    code, out, err = run(capsys, monkeypatch, *CHAT, "--store", url, lines="hi\n")
    assert code == 0, err
    code, out, err = run(capsys, monkeypatch, "sessions", "list", "--store", url, "--json")
    assert code == 0, err
    rows = json.loads(out)["sessions"]
    assert [(r["session_id"], r["message_count"]) for r in rows] == [("s", 2)]
    code, out, err = run(capsys, monkeypatch, "sessions", "delete", "s", "--store", url)
    assert code == 0, err
    assert json_file_store.JsonFileSessionStore(tmp_path / "js").list_sessions() == []
    # --help lists it with the built-in forms.
    assert main(["sessions", "list", "--help"]) == 0
    assert "jsonfile:///path/to/folder" in " ".join(capsys.readouterr().out.split())
