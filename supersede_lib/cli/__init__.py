"""Command lines, the top layer: what a shell runs; no library module imports them."""
