"""Library settings the start-up probe refuses (launch.environment): a set of variables that only
works together is kept; variables refused even alone are named; a failing combination is dropped."""
from __future__ import annotations

import types

import pytest

from hmb import launch


@pytest.fixture
def fake(monkeypatch):
    # The "library" starts unless: CELL without PACK (they must move together), or BAD at all,
    # or X and Y together.
    def accepts(target, settings):
        if "BAD" in settings:
            return False
        if "CELL" in settings and "PACK" not in settings:
            return False
        return not ("X" in settings and "Y" in settings)
    monkeypatch.setattr(launch, "library_accepts", accepts)
    return types.SimpleNamespace(impl=None, name="fake")


def test_variables_that_only_work_together_are_kept(fake):
    env, added = launch.environment(fake, 1, {"CELL": "65536", "PACK": "65536"}, None)
    assert added["CELL"] == "65536" and added["PACK"] == "65536" and "HMB_ENV_REFUSED" not in added


def test_a_variable_refused_alone_is_named_and_left_out(fake, capsys):
    env, added = launch.environment(fake, 1, {"CELL": "1", "PACK": "1", "BAD": "1"}, None)
    assert "BAD" not in added and added["HMB_ENV_REFUSED"] == "BAD=1"
    assert added["CELL"] == "1"
    assert "does not start with BAD=1" in capsys.readouterr().err


def test_a_failing_combination_is_dropped_whole(fake):
    env, added = launch.environment(fake, 1, {"X": "1", "Y": "2"}, None)
    assert "X" not in added and "Y" not in added
    assert added["HMB_ENV_REFUSED"] == "X=1 Y=2"
