"""Speed benchmarks (`make bench`, not part of the test suite), at the top of the import layers.

`runner` (runner overhead and concurrency; `main` runs every part), `engines` (llama.cpp and
batched transformers side by side), `prefix` (the prompt-prefix cache against a whole-prompt
prefill), `train_prefix` (the shared prompt prefix in GRPO training).
"""
