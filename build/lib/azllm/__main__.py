"""``python -m azllm COMMAND``: the command line of :mod:`azllm.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
