"""``python -m matchcast`` is the ``matchcast`` command."""

from matchcast.cli import main

main()
