import uuid

import pytest


@pytest.fixture
def name() -> str:
    """A lease name no other test uses (every name of the shop starts with "shop.")."""
    return f"shop.test.{uuid.uuid4().hex[:10]}"
