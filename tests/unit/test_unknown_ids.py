"""An unknown experiment id is refused by `experiments.get` with one message: the catalog's ids nearest to
what was typed (at most six, nearest first), then the pointer to `accel list`; a typed id near nothing gets no
"did you mean" at all."""

from __future__ import annotations

import re

import pytest

from pipelines.core.config import experiments


def _suggestions(typed: str) -> list[str]:
    with pytest.raises(experiments.UnknownExperiment) as refused:
        experiments.get(typed)
    message = refused.value.args[0]  # a KeyError: str() would quote it
    shape = re.fullmatch(rf"unknown experiment id '{re.escape(typed)}'(?: \(did you mean: (.+)\?\))?; "
                         r"`accel list` shows every id", message)
    assert shape, message
    return shape[1].split(", ") if shape[1] else []


def test_unknown_id_suggests_the_nearest_ids_first():
    assert _suggestions("ch2-nobais")[0] == "ch2-nobias"  # one swapped letter: the catalog's 2nd ch2 id
    assert _suggestions("ch2-baselin")[0] == "ch2-baseline"
    compile_ids = _suggestions("ch3-compile")
    assert compile_ids[:3] == ["ch3-compile-cnn-cpu", "ch3-compile-densenet-gpu", "ch3-compile-modes-cnn-cpu"]
    assert len(compile_ids) <= 6
    assert set(_suggestions("ch4")) <= {i for i in experiments.all_experiments() if i.startswith("ch4-")}
    assert _suggestions("dlf-u9-compil")[0] == "dlf-u9-compile"
    assert _suggestions("zzzz") == []  # nothing near: no "did you mean"


def test_unknown_id_suggests_neighbours():
    with pytest.raises(experiments.UnknownExperiment, match="did you mean: ch2-baseline"):
        experiments.get("ch2-baselin")
