"""The Qwen chat template, rendered and counted without a model download.

Token caps (SFT 256k, RL 128k) apply to what the trainer feeds the model: the conversation rendered
through the chat template, special tokens included. `QWEN_CHAT_TEMPLATE` is the Jinja source of the
Qwen3-style template (ChatML turns; the assistant answer after the last user message opens with a
`<think>` block, empty when there is no reasoning); `render_chat` renders the same text in Python
(tests check them equal with jinja2), and `count_chat_tokens` counts it exactly: the special tokens
`<|im_start|>` / `<|im_end|>` (and, in the Qwen vocabulary, `<think>` / `</think>`) count one each
and every span between them is encoded as ordinary text. Because every message is closed by special tokens, a conversation's count is the sum of its
messages' counts, so history turns are counted once and reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.worldmodel import THINK_CLOSE, THINK_OPEN
from worldline.tokenizer import QwenTokenCounter, TokenCounter

CHAT_TEMPLATE_NAME = "qwen3-chatml"
"""Recorded in pool manifests and cards next to the tokenizer name."""
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

QWEN_CHAT_TEMPLATE = (
    "{%- set ns = namespace(last_query=-1) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set ns.last_query = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' and loop.index0 > ns.last_query -%}"
    "{%- set content = m['content'] -%}{%- set reasoning = '' -%}"
    "{%- if '</think>' in content -%}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content + "
    "'<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Jinja source of the template (for trainers and tests); `render_chat` is its Python twin."""


def _last_query(messages: Sequence[dict[str, Any]]) -> int:
    last = -1
    for i, m in enumerate(messages):
        if m["role"] == "user":
            last = i
    return last


def _answer_body(content: str) -> str:
    """The text between `<|im_start|>` and `<|im_end|>` of a final assistant answer."""
    reasoning = ""
    if THINK_CLOSE in content:
        reasoning = content.split(THINK_CLOSE)[0].rstrip("\n").split(THINK_OPEN)[-1].lstrip("\n")
        content = content.split(THINK_CLOSE)[-1].lstrip("\n")
    return f"assistant\n{THINK_OPEN}\n{reasoning.strip(chr(10))}\n{THINK_CLOSE}\n\n{content}"


def message_bodies(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Per message, the text the template puts between `<|im_start|>` and `<|im_end|>`."""
    last = _last_query(messages)
    return [
        _answer_body(m["content"])
        if m["role"] == "assistant" and i > last
        else f"{m['role']}\n{m['content']}"
        for i, m in enumerate(messages)
    ]


def render_chat(messages: Sequence[dict[str, Any]], add_generation_prompt: bool = False) -> str:
    """The conversation as the model reads it."""
    text = "".join(f"{IM_START}{body}{IM_END}\n" for body in message_bodies(messages))
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def _marker_tokens(counter: TokenCounter) -> int:
    """Tokens of `<think>` / `</think>`: one in the Qwen vocabulary (added tokens), else as text."""
    return 1 if isinstance(counter, QwenTokenCounter) else counter.count(THINK_OPEN)


def _text_tokens(counter: TokenCounter, text: str) -> int:
    """Tokens of text between special tokens; think markers are atomic wherever they appear."""
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return counter.count(text)
    marker = _marker_tokens(counter)
    total = 0
    for i, outer in enumerate(text.split(THINK_CLOSE)):
        total += marker if i else 0
        for j, piece in enumerate(outer.split(THINK_OPEN)):
            total += (marker if j else 0) + (counter.count(piece) if piece else 0)
    return total


def body_tokens(counter: TokenCounter, body: str) -> int:
    """Tokens of one rendered message: its two special tokens, its body, and the newline after it."""
    return 2 + _text_tokens(counter, body) + counter.count("\n")


def generation_prompt_tokens(counter: TokenCounter) -> int:
    return 1 + counter.count("assistant\n")


def count_chat_tokens(
    counter: TokenCounter, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = False
) -> int:
    """Exact token count of `render_chat(messages, add_generation_prompt)`."""
    total = sum(body_tokens(counter, body) for body in message_bodies(messages))
    return total + (generation_prompt_tokens(counter) if add_generation_prompt else 0)


def message_tokens(counter: TokenCounter, role: str, content: str, final_answer: bool = False) -> int:
    """Tokens of one message in a rendered conversation (`final_answer`: an assistant message after
    the last user message, which the template opens with a think block)."""
    body = _answer_body(content) if final_answer else f"{role}\n{content}"
    return body_tokens(counter, body)
