"""The pre-registered training proof: arms, seeds and test sets fixed before a run, analysed once.

`analysis` computes the registered comparisons from the evaluation files (paired tests, the
instrument's agreement on the answers behind a trained number); `registered` runs the proof one
piece per session (baselines, the next arm, the report) and verifies what is committed.
"""
