"""``python -m services.controller -c controller.conf`` — same as ``mqctl startController``."""

from mqctl.cli import main

if __name__ == "__main__":
    main(["startController", *__import__("sys").argv[1:]])
