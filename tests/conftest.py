"""Shared test configuration: the fake OpenAI-compatible server fixture (`fake_llm`) and hypothesis profiles."""

import os

from hypothesis import settings

pytest_plugins = ["tests.fakellm"]

# CI replays the same generated examples on every run (a red build is then reproducible); local runs
# explore new ones. Select another profile with HYPOTHESIS_PROFILE=dev|ci.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
