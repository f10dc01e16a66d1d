"""README's example runs, and its two first commands are the ones CI relies on."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    script = tmp_path / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "on_model_call         Timing(1)" in done.stdout
    assert done.stdout.rstrip().endswith("It is sunny.")


def test_readme_starts_with_the_demo_and_test_commands() -> None:
    first_block = re.findall(r"```bash\n(.*?)```", README, re.S)[0].splitlines()
    assert "nox -s demo" in first_block[0]
    assert "nox -s tests" in first_block[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "nox -s tests" in ci


def test_readme_says_how_to_install_and_lists_every_extra() -> None:
    section = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    listed = set(re.findall(r"^\| `([\w-]+)` \|", section, re.MULTILINE))
    assert listed == set(extras)
    assert re.search(r"^pip install -e \.\s", section, re.MULTILINE)
    assert "pip install -e '.[cli,otel]'" in section
