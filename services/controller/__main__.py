"""``python -m services.controller -c controller.conf`` runs ``startController``, as ``mqctl startController``
does (the same options), without the command line's other parts."""

import sys

# httpx imports its own command line (click, rich and pygments: about 6 MiB resident) whenever they are
# installed, as they are beside mqctl; a server never runs it, so it is left out of the process.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from services.common.entry import run_command  # noqa: E402
from services.controller.cli import start_controller  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(start_controller, sys.argv[1:], "python -m services.controller"))
