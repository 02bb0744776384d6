"""`python -m lab VERB ...`: the lab's command line lives in lab/cli."""

import sys

from lab.cli import main

if __name__ == "__main__":
    sys.exit(main())
