"""``python -m services.broker -c broker.conf`` runs ``startBroker``, as ``mqctl startBroker`` does (the same
options), without the command line's other parts."""

import sys

from services.broker.cli import start_broker
from services.common.entry import run_command

if __name__ == "__main__":
    sys.exit(run_command(start_broker, sys.argv[1:], "python -m services.broker"))
