"""``python -m bench.lean_check``: runs the driver."""

import sys

from bench.lean_check.driver import main

if __name__ == "__main__":
    sys.exit(main())
