"""``python -m azllm COMMAND``: the command line of :mod:`azllm.cli`."""

from .cli import main
from .utils import exit_now

if __name__ == "__main__":
    exit_now(main())
