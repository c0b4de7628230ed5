"""Model clients behind one chat protocol.

`chat` defines `ChatModel` (async `achat(messages) -> ChatResult`) and the errors every backend
raises; `openai_api` talks to OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp);
`gguf` embeds llama.cpp in-process; `hf` runs a transformers model (plus a LoRA adapter);
`spec` builds one of them from a profile's model spec; `cache` wraps any of them in a SQLite
response cache; `local_server` serves a model (or a scripted fake) over HTTP on 127.0.0.1;
`tiny` builds a random Qwen2 for offline tests.
"""
