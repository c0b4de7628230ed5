"""What every study shares: the tables and summaries it writes and compares.

`headings` (notebook names, column headers, how a number is printed), `outputs` (Markdown and CSV
tables, `summary.json`, a study's progress bar), `comparison` (accuracy rows, McNemar, full context
vs bounded memory, failure classes), `evidence` (what a trained run's files show: learning trend,
paired tests), `paper_results` (the paper's numbers, quoted beside ours, never mixed), and the judges of
studies' committed predictions, clause by clause: `memory_predictions` (notebook 08's M1-M6) and
`robustness_predictions` (notebook 09's P1-P7).
"""
