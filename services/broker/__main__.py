"""``python -m services.broker -c broker.conf`` — same as ``mqctl startBroker``."""

import sys

from mqctl.cli import main

if __name__ == "__main__":
    main(["startBroker", *sys.argv[1:]])
