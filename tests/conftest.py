"""Shared test configuration: the fake OpenAI-compatible server fixture and common trajectory builders."""

from pathlib import Path

pytest_plugins = ["tests.fakellm"] if (Path(__file__).parent / "fakellm.py").exists() else []
