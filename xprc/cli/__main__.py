"""`python -m xprc.cli ...`: the same command line as the `xprc` script."""

import sys

from xprc.cli import main

sys.exit(main())
