"""The studies behind notebooks 01-07: each reads its block of a profile (configs/<name>.yaml), runs
its conditions, analyses them, and writes tables, figures and a summary under outputs/<profile>/.

`profiles` (the typed profile and the models it names), `labels` (notebook names, column labels,
headline numbers), `outputs` (the tables and `summary.json` a study writes), `comparison` (accuracy,
McNemar, the paired full-context vs bounded-memory comparison, failure classes), `common` (all of
those by one name, plus a study's progress bar, judge and model release), `validation` (the matcher
against the human labels), one module per notebook (`data_overview`, `isolation`, `frontier`, `scale`,
`environment_validation`, `training`, `transfer`), `paper_results` (the paper's numbers) and
`report` (REPORT.md from the files on disk).
"""
