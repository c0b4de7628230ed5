"""`python -m supersede_lib.bench` (what `make bench` runs): see `supersede_lib.bench.runner`."""

from supersede_lib.bench.runner import main

if __name__ == "__main__":
    main()
