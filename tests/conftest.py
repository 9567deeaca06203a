import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tiny_lm import build_tiny_lm  # noqa: E402

EMPA_DIR = Path(__file__).resolve().parents[2] / "shared" / "empa"


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """Folder with a tiny random-weight Llama + ChatML tokenizer (built once per test session)."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="session")
def empa_dir() -> Path:
    """The EMPA benchmark subset (third-party, CC BY-NC) beside the repository, or skip."""
    if not EMPA_DIR.is_dir():
        pytest.skip(f"EMPA data not found at {EMPA_DIR} (tests reading its dialogue files need it)")
    return EMPA_DIR
