"""The chat message type, at the bottom so the prompts and every model backend share it.

`prompts` builds lists of them and `models.chat.ChatModel` takes them; defining the alias here (not in
`models`) keeps the agent core free of any import from a higher layer.
"""

from __future__ import annotations

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": text}
