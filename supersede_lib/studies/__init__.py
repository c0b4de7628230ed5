"""The studies behind notebooks 01-07: each reads a profile (configs/<name>.yaml), runs its
conditions, analyses them and writes tables, figures and a summary under outputs/<profile>/."""
