"""Where episodes come from.

`longmemeval` reads the LongMemEval knowledge-update records (a local file or the Hugging Face hub)
into `Episode`s; `synthetic` generates supersession timelines procedurally (deterministic by seed,
every superseded value known); `episodes` turns a profile's `episodes:` block (`EpisodeSpec`) into
the list a study runs on (`load_episodes`).
"""
