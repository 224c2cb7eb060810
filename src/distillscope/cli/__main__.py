"""``python -m distillscope.cli``: the ``distillscope`` command."""

import sys

from distillscope.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
