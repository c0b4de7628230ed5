"""The committed record and its replay: run or replay a profile's notebooks, then check and report.

`notebooks` runs notebooks 01-07 headless (papermill) for a profile, replaying its recorded
responses when it has them; `record` adopts a live run's tables into the record; `verify` compares
every table of a replay with the committed one; `report` writes `outputs/<profile>/REPORT.md` from
the files on disk.
"""
