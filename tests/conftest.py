"""Shared test configuration: the fake OpenAI-compatible server fixture (`fake_llm`)."""

pytest_plugins = ["tests.fakellm"]
