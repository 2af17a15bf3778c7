"""Benchmark prompts: a varied built-in set in a seeded order, or the user's own from a file.

Prompts differ in topic, length and style (code, prose, lists, reasoning) because speculative
decoding accepts more drafts on predictable text than on free prose: one repeated prompt would
measure only one acceptance regime.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson

BUILTIN_PROMPTS: tuple[str, ...] = (
    "Write a detailed technical explanation of how a CPU cache hierarchy works.",
    "Explain the history of the Roman Empire from its founding to its fall.",
    "Write a Python implementation of a red-black tree with insertion and deletion, with comments.",
    "Describe, step by step, how to bake sourdough bread from a starter.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how public-key cryptography works, with a worked RSA example using small numbers.",
    "List and explain twenty common mistakes in concurrent programming and how to avoid them.",
    "Write a SQL schema for a library management system and example queries for common reports.",
    "Explain the theory of general relativity to a curious high-school student.",
    "Compare the economic policies of mercantilism, laissez-faire and Keynesianism.",
    "Write a Rust program that parses a CSV file and computes per-column statistics.",
    "Describe the water cycle and how climate change is altering it.",
    "Write a detailed travel guide for a week in Kyoto, day by day.",
    "Explain how a transformer language model generates text, from tokenization to sampling.",
    "Write the documentation for a command-line tool that synchronises two directories.",
    "Prove that there are infinitely many prime numbers, then discuss related open problems.",
    "Write a dialogue between Socrates and a modern software engineer about technical debt.",
    "Explain how TCP congestion control works, including slow start and fast recovery.",
    "Write a JavaScript single-page todo application with local storage, fully commented.",
    "Summarise the causes and consequences of the Industrial Revolution in Britain.",
    "Explain the biology of how vaccines train the immune system.",
    "Write a poem cycle of twelve sonnets, one for each month of the year.",
    "Describe how a modern GPU executes a matrix multiplication, from kernels to warps.",
    "Write unit tests in Python for a function that validates email addresses, with edge cases.",
    "Explain the rules of chess and then walk through a famous game move by move.",
    "Write a business plan for a small bicycle repair shop in a university town.",
    "Explain how garbage collection works in the JVM, comparing the main collectors.",
    "Translate the following idea into a detailed lesson plan: teaching fractions with pizza.",
    "Write a Bash script that backs up a directory with rotation, and explain every line.",
    "Describe the architecture of a distributed key-value store with replication and failover.",
    "Explain the French Revolution through the eyes of a Parisian baker, in the first person.",
    "Write a C function that implements a lock-free single-producer single-consumer queue.",
)
"""Thirty-two prompts of different kinds; every one invites a long answer."""

MAX_PROMPTS_FILE_BYTES = 10 * 1024 * 1024


class PromptsError(ValueError):
    """A prompts file could not be used; ``str(e)`` is one line."""


def builtin_prompts(seed: int = 0) -> list[str]:
    """The built-in prompts in an order fixed by ``seed``."""
    prompts = list(BUILTIN_PROMPTS)
    random.Random(seed).shuffle(prompts)
    return prompts


def parse_prompts(text: str, source: str = "prompts") -> list[str]:
    """Prompts from text: a JSON list of strings, or else one prompt per non-empty line.

    Raises:
        PromptsError: The text holds no prompt, or a JSON list holds something else than text.
    """
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError as e:
            raise PromptsError(
                f"{source}: looks like a JSON list but is not valid JSON: {e}"
            ) from e
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise PromptsError(f"{source}: a JSON prompts file must be a list of strings")
        prompts = [p for p in data if p.strip()]
    else:
        prompts = [line.strip() for line in text.splitlines() if line.strip()]
    if not prompts:
        raise PromptsError(f"{source}: no prompts in it")
    return prompts


def load_prompts(path: str | Path | None = None, seed: int = 0) -> list[str]:
    """The prompts for a benchmark: from ``path`` in file order, else the seeded built-in set.

    Raises:
        PromptsError: The file cannot be read or holds no prompt.
    """
    if path is None:
        return builtin_prompts(seed)
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_PROMPTS_FILE_BYTES:
            raise PromptsError(f"{p}: {size / 1e6:.1f} MB is too large for a prompts file")
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PromptsError(f"cannot read prompts file {p}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise PromptsError(f"{p}: not UTF-8 text") from e
    return parse_prompts(text, str(p))


__all__ = [
    "BUILTIN_PROMPTS",
    "PromptsError",
    "builtin_prompts",
    "load_prompts",
    "parse_prompts",
]
