"""Shared test configuration: the fake OpenAI-compatible server fixture (`fake_llm`) and hypothesis profiles."""

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.helpers.fakellm", "tests.helpers.disks"]

# CI replays the same generated examples on every run (a red build is then reproducible); local runs
# explore new ones. Select another profile with HYPOTHESIS_PROFILE=dev|ci.
# Tests never assert timings: no per-example deadline and no "generation is slow" health check, which
# both fail on a loaded 2-core machine for reasons unrelated to the behaviour under test.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, print_blob=True, **_UNTIMED)
settings.register_profile("dev", print_blob=True, **_UNTIMED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
