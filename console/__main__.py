"""`python -m console ...` is `rayka console ...` (rayka/cli.py parses the arguments)."""

import sys

from rayka.cli import main

sys.exit(main(["console", *sys.argv[1:]]))
