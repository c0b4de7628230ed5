"""The studies behind notebooks 01-07: each reads its block of a profile (configs/<name>.yaml), runs
its conditions, analyses them, and writes tables, figures and a summary under outputs/<profile>/.

One module per notebook (`data_overview`, `isolation`, `frontier`, `scale`, `environment_validation`,
`training`, `transfer`), `evaluation_sets` (trained adapters judged on named sets) and `notebook`
(what a notebook's cells call).
"""
