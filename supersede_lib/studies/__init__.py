"""The studies behind notebooks 01-07: each reads its block of a profile (configs/<name>.yaml), runs
its conditions, analyses them, and writes tables, figures and a summary under outputs/<profile>/.

`profiles` (the typed profile and the models it names), `common` (labels, numbers, files, the paired
comparison), one module per notebook (`data_overview`, `isolation`, `frontier`, `scale`,
`environment_validation`, `training`, `transfer`), `paper_results` (the paper's numbers) and
`report` (REPORT.md from the files on disk).
"""
