"""Fixtures of the judge tests: one fake OpenAI-compatible server (real HTTP) per module."""

import pytest

from tests.fake_openai import FakeOpenAI


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as fake:
        yield fake
