import sys

from .cli import main

if __name__ == "__main__":  # not when a spawned process imports it as its main module (records.warm_grid)
    sys.exit(main())
