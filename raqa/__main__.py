"""`python -m raqa VERB ...`: the command line lives in raqa/cli."""

import sys

from raqa.cli import main

if __name__ == "__main__":
    sys.exit(main())
