"""One GGUF conversion at a time: a second process waits and uses the first one's folder.

Seen here: two processes (a baseline evaluation and a training run) dequantised the same GGUF at
once; the second replaced the first's finished folder while the first loaded from it, and the
training run died on a half-deleted model.safetensors.
"""

import threading
import time
from pathlib import Path

from supersede_lib.models import hf


def test_concurrent_conversions_of_one_gguf_convert_once(tmp_path: Path, monkeypatch) -> None:
    gguf = tmp_path / "models" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    calls = []

    def slow_convert(source: Path, gguf_file: str, root: Path, target: Path) -> None:
        calls.append(gguf_file)
        time.sleep(0.3)
        staging = root / ".staging"
        staging.mkdir()
        (staging / "config.json").write_text("{}")
        staging.rename(target)

    monkeypatch.setattr(hf, "_convert_gguf", slow_convert)
    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(hf.materialize_gguf(gguf.parent, "m.gguf", tmp_path / "hf"))
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["m.gguf"]
    assert results == [tmp_path / "hf" / "m"] * 3
