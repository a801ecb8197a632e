"""The README's promises: CI runs its test command verbatim, and it documents every summary key."""

import re
from pathlib import Path

import torch
from torch import nn

import autotune

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks[:2] for line in block.strip().splitlines()]


def test_readme_opens_with_the_two_commands():
    install_demo, tests = readme_commands()[:2]
    assert install_demo == "pip install -e . && autotune demo"
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = readme_commands()[1]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_every_summary_key_is_documented(tmp_path):
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False) as prof:
        for _ in range(6):
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    text = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)`", text, flags=re.M))
    documented |= {k for row in re.findall(r"^\| `([a-z_]+)`, `([a-z_]+)`", text, flags=re.M) for k in row}
    missing = [key for key in prof.summary if key not in documented]
    assert missing == []
