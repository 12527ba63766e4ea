"""`python -m xprc ...`: the same command line as the `xprc` script (xprc.cli)."""

import sys

from xprc.cli import main

sys.exit(main())
