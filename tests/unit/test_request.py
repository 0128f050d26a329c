"""A worker's request (config/request.py, harness/worker.py): the orchestrator's plans travel as they were
built, and the launchers read what they mount from it."""

from __future__ import annotations

import pytest

from pipelines.core.cli.run_command import build_plan
from pipelines.core.config import experiments
from pipelines.core.config import request as requests
from pipelines.core.distributed import knobs
from pipelines.core.errors import ConfigError
from pipelines.core.harness import worker

RUNNABLE = [e.id for e in experiments.all_experiments().values() if e.status != "planned" and e.pipeline]


@pytest.mark.parametrize("scale", ["smoke", "bench", "book"])
def test_every_entry_s_plan_comes_back_from_its_request_unchanged(tmp_path, scale):
    for experiment_id in RUNNABLE:
        plan = build_plan(experiment_id, scale, (), (), {"results_dir": tmp_path})
        asked = worker.request_of([plan], "r1", pairing=requests.Pairing("g", 2, 1), finish="json")
        back = requests.read(worker.write_request(asked, tmp_path))
        assert back == asked
        [rebuilt] = worker.plans_of(back)
        assert rebuilt.experiment is plan.experiment and type(rebuilt.pipeline) is type(plan.pipeline)
        assert rebuilt.configs == plan.configs, experiment_id


def test_a_round_s_request_is_one_repeat_with_no_rule_of_its_own(tmp_path):
    plan = build_plan("ch2-nobias", "bench", (), (), {"results_dir": tmp_path})
    assert plan.configs[0].auto and plan.configs[0].rounds
    asked = worker.request_of([plan], "r1", one_repeat=True)
    [cfg] = worker.plans_of(asked)[0].configs
    assert (cfg.rounds, cfg.repeats, cfg.auto, cfg.budget_s) == (None, 1, False, None)
    assert worker.record_paths(asked) == [tmp_path / "ch2-nobias--r1.jsonl"]


def test_a_missing_or_foreign_request_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="does not exist on this host"):
        requests.read(tmp_path / "nope.json")
    (tmp_path / "other.json").write_text('{"version": 99}')
    with pytest.raises(ConfigError, match="is not a version-2 request"):
        requests.read(tmp_path / "other.json")
    (tmp_path / "older.json").write_text('{"version": 1, "run_id": "x", "plans": [], "pairing": {"group": "g"}}')
    with pytest.raises(ConfigError, match="is not a version-2 request"):  # its pairing said `group`
        requests.read(tmp_path / "older.json")
    for broken in ('{"version": 2}', '{"version": 2, "run_id": "x", "plans": []}',
                   '{"version": 2, "run_id": "x", "plans": [{"experiment": "a"}]}'):
        (tmp_path / "broken.json").write_text(broken)
        with pytest.raises(ConfigError, match="is not a whole request"):
            requests.read(tmp_path / "broken.json")


def test_the_container_launcher_mounts_the_folders_the_request_names(tmp_path):
    plan = build_plan("ch2-nobias", "smoke", (), (), {"results_dir": tmp_path / "res", "data_root": tmp_path / "d"})
    path = worker.write_request(worker.request_of([plan], "r1"), tmp_path / "res")
    args = ["python3", "-m", "pipelines", requests.FLAG, str(path)]
    assert knobs.arg_value(args, "--results-dir") == str(tmp_path / "res")
    assert knobs.arg_value(args, "--data-root") == str(tmp_path / "d")
    assert knobs.arg_value(args, "--device") == "cpu"
    with pytest.raises(knobs.KnobError, match="does not exist"):
        knobs.arg_value(["python3", "-m", "pipelines", requests.FLAG, str(tmp_path / "gone.json")], "--device")


def test_a_launcher_started_without_checked_knobs_preflights_the_worker_s_request(tmp_path, accel_in_process):
    """launch/_common.sh preflight, when the script checks its knobs itself (another PYTHON, IMAGE): the same
    refusals as for `run ID ...`, from the request; it prints the rendezvous wait and the results folder."""
    plan = build_plan("ch2-nobias", "smoke", (), (), {"results_dir": tmp_path / "res", "dataset": "synthetic"})
    path = worker.write_request(worker.request_of([plan], "r1"), tmp_path / "res")
    out = accel_in_process("preflight", "--world-size", "1", requests.FLAG, str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["120", str(tmp_path / "res")]
    missing = accel_in_process("preflight", requests.FLAG, str(tmp_path / "gone.json"))
    assert missing.returncode == 2 and "does not exist on this host" in missing.stderr
