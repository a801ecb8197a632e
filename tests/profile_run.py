"""Run the real ``autotune profile`` on a test script, on one process or under torchrun."""

import os
import subprocess
import sys
from pathlib import Path


def profile_script(
    run_dir: Path,
    script: Path,
    *args: str,
    ranks: int = 1,
    cwd: Path | None = None,
    timeout: float = 240,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Path:
    """``autotune profile --quiet --run-dir RUN_DIR OPTIONS SCRIPT ARGS`` (through torchrun for ranks > 1).

    Fails the test with the end of stderr unless it exits 0; returns ``run_dir``. What the script
    printed is kept in ``run_dir.with_name(run_dir.name + ".stdout")`` (and ``.stderr``). ``env``:
    variables added to the environment.
    """
    launcher = (
        ["-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--standalone"] if ranks > 1 else []
    )
    cmd = [sys.executable, *launcher, "-m", "autotune", "profile", "--quiet", "--run-dir", str(run_dir)]
    cmd += options
    out = subprocess.run(
        [*cmd, str(script), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    run_dir.with_name(run_dir.name + ".stdout").write_text(out.stdout)
    run_dir.with_name(run_dir.name + ".stderr").write_text(out.stderr)
    return run_dir
