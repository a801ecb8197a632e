"""The README's promises: it opens with the two fresh-machine commands; CI runs its test command verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    """Every line of the README's bash blocks, in order."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.strip().splitlines()]


def test_readme_opens_with_the_two_commands():
    commands = readme_commands()
    assert commands.index("pip install -e . && autotune demo") < 3
    assert any("pytest" in line for line in commands[:4])


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = next(line for line in readme_commands() if "python -m pytest" in line)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines

