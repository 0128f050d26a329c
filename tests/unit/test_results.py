import json
import os
from pathlib import Path

import pytest

from pipelines.core.record import results
from pipelines.core.config.runconfig import RunConfig

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "result_v3.json").read_text())


def test_golden_record_is_valid_and_its_keys_are_the_schema():
    results.validate(GOLDEN)
    assert set(GOLDEN) == set(results.REQUIRED_KEYS)
    # The config section is exactly RunConfig plus what the runner adds; a renamed field breaks this.
    runner_keys = {"data_source", "train_samples", "test_samples_available"}
    assert set(GOLDEN["config"]) == set(RunConfig.__dataclass_fields__) | runner_keys


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_live_record_has_the_golden_shape(tmp_path):
    """A real run's record carries every key of the golden one (new keys must be added there too)."""
    from conftest import accel, records

    run = accel("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr
    (live,) = records(tmp_path)
    for section in ("config", "metrics", "env", "dist"):
        assert set(live[section]) == set(GOLDEN[section]), section
    assert live["schema"] == results.SCHEMA and live["config"]["data_source"] == "synthetic"
    assert isinstance(live["machine"]["noisy"], bool) and "noisy_reasons" in live["machine"]
    assert live["energy"]["measured"] or live["energy"]["reason"].startswith("not measurable here: ")


def test_write_is_atomic_and_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "x.jsonl"
    bad = dict(GOLDEN, metrics={"train_s": float("nan")})
    with pytest.raises(results.SchemaError, match="finite"):
        results.write(path, [GOLDEN, bad])
    assert not path.exists() and not list(tmp_path.iterdir())
    results.write(path, [GOLDEN, dict(GOLDEN, repeat=1)])
    assert [r["repeat"] for r in results.read(path)] == [0, 1]


def test_error_record_must_say_what_failed():
    with pytest.raises(results.SchemaError, match="must say what failed"):
        results.validate(dict(GOLDEN, status="error"))


def test_reader_names_file_and_line_of_damage(tmp_path):
    path = tmp_path / "damaged.jsonl"
    path.write_text(json.dumps(GOLDEN) + "\n" + json.dumps(GOLDEN)[:50] + "\n")
    with pytest.raises(results.SchemaError, match=r"damaged.jsonl:2: not JSON"):
        list(results.read(path))
    path.write_text(json.dumps(dict(GOLDEN, schema="accel.result/99")) + "\n")
    with pytest.raises(results.SchemaError, match="unknown schema 'accel.result/99'"):
        list(results.read(path))


def test_an_older_schema_is_read_in_today_s_words_and_left_as_it_is_on_disk(tmp_path):
    """accel.result/1 called a record's comparison `pairing.group`; /2 calls it `pairing.comparison`
    (docs/design.md's glossary). Committed references keep their /1 files, and every reader takes them."""
    old = json.loads((Path(__file__).parents[1] / "golden" / "result_v1.json").read_text())
    assert old["schema"] == "accel.result/1" and results.SCHEMA == "accel.result/3"
    old["pairing"] = {"group": "20261101T000000Z-abcdef", "round": 2, "process": "p"}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (read,) = results.read(path)
    assert read["schema"] == results.SCHEMA
    assert read["pairing"] == {"comparison": "20261101T000000Z-abcdef", "round": 2, "process": "p"}
    assert json.loads(path.read_text())["pairing"]["group"] == "20261101T000000Z-abcdef"  # not rewritten
    (loaded,) = results.load(tmp_path).records
    assert loaded["pairing"]["comparison"] == "20261101T000000Z-abcdef"
    with pytest.raises(results.SchemaError, match="unknown schema"):
        results.validate(json.loads(path.read_text()))  # written records are always today's schema


def test_a_version_2_record_reads_its_one_count_as_repeats_in_one_process(tmp_path):
    """accel.result/2 kept one `repeats` for rounds and repeats, and `repeats_auto`; /3 counts them apart
    (`rounds`, `repeats`, `auto`). An older record was always written by one process: rounds null."""
    old = json.loads((Path(__file__).parents[1] / "golden" / "result_v2.json").read_text())
    assert old["config"]["repeats_auto"] is False and "rounds" not in old["config"]
    path = tmp_path / "v2.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (read,) = results.read(path)
    assert read["schema"] == "accel.result/3"
    assert (read["config"]["rounds"], read["config"]["repeats"], read["config"]["auto"]) == (None, 3, False)
    assert "repeats_auto" not in read["config"]
    assert set(read["config"]) == set(GOLDEN["config"])  # today's words, no others


def test_unwritable_results_dir_is_a_config_error(tmp_path):
    from pipelines.core.errors import ConfigError

    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    if os.access(locked, os.W_OK):  # root ignores permissions: use a path under a regular file instead
        locked = tmp_path / "file"
        locked.write_text("")
        locked = locked / "sub"
    with pytest.raises(ConfigError, match="not writable"):
        results.check_writable(locked)
