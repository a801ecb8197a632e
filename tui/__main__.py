"""``python -m tui [RUN_DIR]``: the dashboard (``autotune dashboard`` runs this; same arguments).

``AUTOTUNE_DASHBOARD_PROG`` names the command in messages (``autotune dashboard`` when the
``autotune`` command line started it).
"""

import os
import sys

from tui.app import main

if __name__ == "__main__":
    sys.exit(main(prog=os.environ.get("AUTOTUNE_DASHBOARD_PROG", "python -m tui")))
