"""Model clients behind one chat protocol.

`chat` defines `ChatModel` (async `achat(messages) -> ChatResult`) and the errors every backend
raises; `openai_api` talks to OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp);
`gguf` embeds llama.cpp in-process; `hf` runs a transformers model (plus a LoRA adapter);
`batched` serves concurrent calls in padded batches on a transformers model, `cpu_features` reads
the CPU's bf16 flags, and `engine` picks
llama.cpp or that batched engine for an embedded model from the CPU's bf16 units (or a GPU);
`spec` turns a model spec (a profile's `model:` dict) into one of them; `rate_limit` adapts
concurrency to 429s; `cache` wraps any of them in a SQLite
response cache; `local_server` serves a model (or a scripted fake) over HTTP on 127.0.0.1;
`tiny` builds a random Qwen2 for offline tests.
"""
