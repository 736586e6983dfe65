"""The command earlier docs and scripts show: ``python -m matchcast.wire_docs [--check]``.

The code is :mod:`matchcast.contract.wire_docs`; this module only runs it, so the command keeps
working after the contract moved into its folder.
"""

import sys

from matchcast.contract.wire_docs import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
