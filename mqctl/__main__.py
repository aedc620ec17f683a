"""``python -m mqctl`` — same as the ``mqctl`` console script."""

from mqctl.cli import main

if __name__ == "__main__":
    main()
