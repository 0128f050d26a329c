"""An unknown experiment id is refused by `experiments.get` with one message: the catalog's ids nearest to
what was typed (at most six, nearest first), then the pointer to `accel list`; a typed id near nothing gets no
"did you mean" at all."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.core.config import experiments

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("argv", [["run", "ch2-nobais"], ["run", "ch2-baseline", "--variant", "nope"],
                                  ["compare", "ch2-baseline", "nope"]])
def test_a_mistyped_id_or_arm_is_refused_before_torch_loads(argv):
    """The refusal comes from the catalog alone: torch and torchvision (seconds of imports) load only once
    the ids and arms are known, so a typo costs a tenth of a second, not three."""
    script = ("import runpy, sys\nsys.argv = ['accel', *sys.argv[1:]]\ntry:\n"
              "    runpy.run_module('pipelines', run_name='__main__')\nexcept SystemExit as ended:\n"
              "    print(ended.code, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr
    assert done.stderr.startswith("accel: error: unknown ") and done.stderr.count("\n") == 1
