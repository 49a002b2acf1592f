"""Shared pytest settings: where the binaries and models are.

TS_BIN       the tokensieve CLI (default build/bin/tokensieve); the unit-test binary ts_tests is
             looked up next to it.
TS_MODELS    directory of model files (default models/, git-ignored).
TS_SHARED_DIR  the shared data directory (default ../shared next to the repository), which
             holds models/stories260K.gguf and data/wikitext2/.
Relative paths are taken from the repository root. Tests skip when a binary or model is absent.
"""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _path(env, default):
    p = pathlib.Path(os.environ.get(env, default))
    return p if p.is_absolute() else ROOT / p


TS_BIN = _path("TS_BIN", "build/bin/tokensieve")
TS_TEST_BIN = TS_BIN.parent / "ts_tests"
TS_MODELS = _path("TS_MODELS", "models")
TS_SHARED_DIR = _path("TS_SHARED_DIR", str(ROOT.parent / "shared"))
# The Python package of the same build (tools/build.sh -DTS_PYTHON=ON lays it out there).
TS_PYTHON_DIR = TS_BIN.parent.parent / "python"
if (TS_PYTHON_DIR / "tokensieve").is_dir() and str(TS_PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(TS_PYTHON_DIR))


def pytest_configure(config):
    config.addinivalue_line("markers", "runtime(seconds): expected wall time of the test on the 2-core CI machine")


def find_model(filename):
    """Path of a model file in TS_MODELS or the shared models directory, or skip the test."""
    for d in (TS_MODELS, TS_SHARED_DIR / "models"):
        if (d / filename).is_file():
            return d / filename
    pytest.skip(f"{filename} not found in {TS_MODELS} or {TS_SHARED_DIR / 'models'}")


@pytest.fixture(scope="session")
def ts_bin():
    if not TS_BIN.is_file():
        pytest.skip(f"{TS_BIN} not built")
    return TS_BIN


@pytest.fixture(scope="session")
def ts_test_bin():
    if not TS_TEST_BIN.is_file():
        pytest.skip(f"{TS_TEST_BIN} not built")
    return TS_TEST_BIN
