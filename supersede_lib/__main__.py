"""`python -m supersede_lib <command> [options]`: the project's command line (see `supersede_lib.cli`)."""

import sys

from supersede_lib.cli import main

if __name__ == "__main__":
    sys.exit(main())
