"""The live line's parts (harness/live.py): a worker notes its finished blocks only where the orchestrator
asked, and the line reads them, or says the worker is not at its blocks yet."""

from __future__ import annotations

from pipelines.core.harness import live
from pipelines.core.train import progress


def test_a_worker_notes_its_blocks_only_where_asked_and_the_line_reads_them(tmp_path, monkeypatch):
    path = tmp_path / "block"
    monkeypatch.delenv(progress.PROGRESS_FILE_ENV, raising=False)
    progress.note_block("ch2-nobias [nobias]", 3, 24)
    assert not path.exists() and live.block_text(path) == "not at its blocks yet"
    monkeypatch.setenv(progress.PROGRESS_FILE_ENV, str(path))
    progress.note_block("ch2-nobias [nobias]", 3, 24)
    assert live.block_text(path) == "block 3 of 24 (ch2-nobias [nobias])"
    path.write_text("3 2")  # caught mid-write
    assert live.block_text(path) == "not at its blocks yet"


def test_the_line_is_off_without_a_terminal_and_hands_the_process_nothing():
    with live.process_line(False, "round 1/3", "ch2-baseline [baseline]", 0.0, None) as extra:
        assert extra == {}
