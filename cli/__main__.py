"""``python -m cli ...``: the ``railbed`` command."""

import sys

from cli.main import main

sys.exit(main())
