"""``import autotune`` stays light; ``tui`` never pulls torch or pynvml."""

import json
import subprocess
import sys

HEAVY = ["plotly", "textual", "skopt", "torch", "pynvml", "nvtx", "ray"]


def loaded_after(statement):
    code = (
        f"import sys, json; {statement}; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_import_autotune_pulls_nothing_heavy():
    assert loaded_after("import autotune") == []


def test_import_tui_pulls_nothing_heavy():
    assert loaded_after("import tui") == []


def test_cli_help_pulls_nothing_heavy():
    assert loaded_after("import autotune.cli.main; autotune.cli.main.build_parser()") == []
    # the demo parses its own options: its help too loads no torch
    demo_help = (
        "import contextlib, io\nfrom autotune.cli.main import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['demo', '--help'])"
    )
    assert loaded_after(f"exec({demo_help!r})") == []


def test_import_time_is_small():
    code = "import time; t = time.perf_counter(); import autotune; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # measured around 0.01 s here; torch alone takes over 1 s, so this catches an eager torch import
    assert float(out.stdout) < 0.5


def test_advice_and_report_data_pull_nothing_heavy():
    # The dashboard builds its Advice screen from these: no torch, no plotly until HTML is drawn.
    statement = (
        "import autotune.report.make, autotune.report.build, autotune.report.markdown, "
        "autotune.report.jsonout, autotune.advice.advise, autotune.cost.model, autotune.cost.prices"
    )
    assert loaded_after(statement) == []


def test_the_tuner_and_its_local_executor_pull_no_ray():
    # ray: only for --executor ray (autotune.tuner.ray_executor)
    statement = "import autotune.cli.tune, autotune.tuner.tune, autotune.tuner.running"
    assert "ray" not in loaded_after(statement)
