"""``python -m autotune`` (also what ``torchrun -m autotune profile ...`` runs)."""

from autotune.cli.main import entry

entry()
