"""`python -m drainer`: the command line, drainer/cli/main.py."""

from drainer.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
