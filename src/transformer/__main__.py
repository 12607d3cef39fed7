"""``python -m transformer``: the same as the ``transformer`` command."""

import sys

from transformer.cli import main

sys.exit(main())
