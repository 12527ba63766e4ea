"""One process of a two-process run on 127.0.0.1 (see test_distributed.py): join the run that
the XPRC_* environment describes (`setup_devices`), sleep DELAY seconds (a process that ends
late, or not at all), then `leave` with status 0 and exit with what it returns."""

import sys
import time

from xprc.distributed import leave, setup_devices

if __name__ == "__main__":
    setup_devices("all")
    print("joined", flush=True)
    time.sleep(float(sys.argv[1]))
    sys.exit(leave(0))
