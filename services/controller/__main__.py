"""``python -m services.controller -c controller.conf`` runs ``startController``, as ``mqctl startController``
does (the same options), without the command line's other parts."""

import sys

from services.common.entry import run_command
from services.controller.cli import start_controller

if __name__ == "__main__":
    sys.exit(run_command(start_controller, sys.argv[1:], "python -m services.controller"))
