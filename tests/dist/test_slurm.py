"""A single-machine SLURM cluster started by the test: munged, slurmctld and slurmd by hand (no systemd),
with a minimal slurm.conf in a temporary folder; then `srun` with 2 tasks, `srun` with IMAGE= (one Podman
container per task, the host's srun outermost) and `sbatch launch/slurm.sbatch`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time

import pytest

from conftest import REPO, records
from distutil import free_port, wait_for
from imageutil import SANDBOX_ARGS, built, needs_podman

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(any(shutil.which(c) is None for c in ("munged", "slurmctld", "slurmd", "srun")),
                                 reason="SLURM and munge are not installed (Debian slurm-wlm, munge)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="the test cluster runs its daemons as root")]

CONF = """ClusterName=accel
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _kill_pidfile(path) -> None:
    if path.is_file():
        try:
            os.kill(int(path.read_text().split()[0]), 9)
        except (ProcessLookupError, ValueError):
            pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    (folder / "munge.key").write_bytes(os.urandom(1024))
    os.chmod(folder / "munge.key", 0o400)
    conf = folder / "slurm.conf"
    conf.write_text(CONF.format(host=socket.gethostname(), dir=folder, ctld_port=free_port(),
                                slurmd_port=free_port(), cpus=os.cpu_count()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["munged", f"--key-file={folder}/munge.key", f"--socket={folder}/munge.sock",
                        f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                        f"--seed-file={folder}/munge.seed", "--force"], check=True, timeout=30)
        subprocess.run(["slurmctld", "-f", str(conf), "-i"], check=True, timeout=60, env=env)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, timeout=60, env=env)
        idle = lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                                env=env, timeout=30).stdout
        assert wait_for(idle, 60, 0.5), (folder / "slurmctld.log").read_text()[-2000:]
        yield env
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True, timeout=30)
        for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            _kill_pidfile(folder / name)


def test_srun_two_tasks(cluster, tmp_path):
    env = {**cluster, "NTASKS": "2", "MASTER_PORT": str(free_port())}
    run = subprocess.run(["launch/srun.sh", "run", "ch8-ddp-template", "--scale", "smoke", "--dataset",
                          "synthetic", "--results-dir", str(tmp_path)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    rec = [r for r in records(tmp_path) if r["status"] == "ok"]
    assert len(rec) == 1 and rec[0]["dist"]["launcher"] == "srun" and rec[0]["dist"]["world_size"] == 2


@pytest.mark.parametrize("entry,variant", [("s004-tp", "tensor"), ("s004-pp", "microbatches=2")])
def test_srun_runs_the_model_parallel_entries_unchanged(cluster, tmp_path, entry, variant):
    env = {**cluster, "NTASKS": "2", "MASTER_PORT": str(free_port())}
    run = subprocess.run(["launch/srun.sh", "run", entry, "--variant", variant, "--scale", "smoke", "--dataset",
                          "synthetic", "--results-dir", str(tmp_path)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    (rec,) = records(tmp_path)
    assert rec["status"] == "ok" and rec["dist"]["launcher"] == "srun" and rec["dist"]["world_size"] == 2


def test_sbatch_runs_the_batch_script(cluster, tmp_path):
    out = tmp_path / "job.out"
    env = {**cluster, "MASTER_PORT": str(free_port())}
    submit = subprocess.run(["sbatch", "--parsable", "--ntasks", "2", "--output", str(out), "launch/slurm.sbatch",
                             "run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic",
                             "--results-dir", str(tmp_path / "results")], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    assert wait_for(lambda: _job(env, job)["JobState"] in ENDED, 300, 1), f"job {job} did not end: {_job(env, job)}"
    time.sleep(1)
    log = out.read_text() if out.exists() else ""
    rec = [r for r in records(tmp_path / "results") if r["status"] == "ok"]
    assert len(rec) == 1, log[-3000:]
    assert rec[0]["dist"]["launcher"] == "srun" and rec[0]["dist"]["world_size"] == 2
    assert f"MASTER_ADDR={socket.gethostname()}" in log  # from the allocation's node list


def test_a_signal_slurm_sends_every_process_of_the_step_ends_as_interrupted(cluster, tmp_path):
    """A time limit, `scancel` or a preemption: SLURM signals every process of the step, DataLoader workers
    too. The task notes it, stops at its next step and keeps its records: one line, an `interrupted` record,
    no traceback, no error record, nothing left running (train/interrupt.py)."""
    env = {**cluster, "NTASKS": "1", "MASTER_PORT": str(free_port())}
    run = subprocess.Popen(["launch/srun.sh", "run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic",
                            "--num-workers", "2", "--repeats", "3", "--steps", "300", "--results-dir", str(tmp_path)],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: any(r["status"] == "ok" for r in records(tmp_path)) or run.poll() is not None, 300, 0.1)
    assert run.poll() is None, run.communicate()
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True,
                          timeout=30).stdout.split()
    subprocess.run(["scancel", "--signal=TERM", *jobs], env=env, check=True, timeout=30)  # every step's processes
    out, err = run.communicate(timeout=120)
    assert "accel: interrupted by SIGTERM" in err and "Traceback" not in err, err[-3000:]
    statuses = [r["status"] for r in records(tmp_path)]
    assert statuses[0] == "ok" and "error" not in statuses and set(statuses[1:]) <= {"interrupted"}, statuses
    assert not subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()


# A job's end as the controller states it. Absence from `squeue` is not one: a query the controller is too busy
# to answer prints nothing too, and a requeued job is briefly between its two runs.
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def _job(env, job: str) -> dict:
    """JobState, Reason and Restarts of a job (`scontrol show job`, kept MinJobAge=300 s after its end);
    JobState "UNKNOWN" while the controller does not answer."""
    show = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, env=env,
                          timeout=30)
    fields = dict(re.findall(r"\b(JobState|Reason|Restarts)=(\S+)", show.stdout))
    return {"JobState": "UNKNOWN", "Reason": "", "Restarts": "0", **fields}


@pytest.mark.parametrize("image", [None, pytest.param("podman", marks=needs_podman)], ids=["host", "image"])
def test_usr1_before_the_time_limit_checkpoints_requeues_and_the_requeued_job_finishes(cluster, tmp_path, image):
    """SLURM's warning before a time limit (--signal=B:USR1@N: the batch shell only; here `scancel --signal=USR1
    --batch`): the shell passes it to the ranks, which stop after their next step checkpoint and exit 75; the
    shell requeues the job (scontrol), which resumes there and finishes. The ledger counts the requeue. With
    IMAGE= the ranks run in one container per task (the signal crosses into them) and scontrol on the host."""
    from pipelines.core.distributed import requeue
    from pipelines.core.train import checkpoint

    ckpt, results, out = tmp_path / "ckpt", tmp_path / "results", tmp_path / "job.out"
    env = {**cluster, "MASTER_PORT": str(free_port())}
    if image:
        env.update(IMAGE=f"podman:{built('cpu')['tag']}", CONTAINER_ARGS=SANDBOX_ARGS)
    submit = subprocess.run(["sbatch", "--parsable", "--ntasks", "2", "--open-mode", "append", "--output", str(out),
                             "launch/slurm.sbatch", "run", "ch8-ddp-template", "--scale", "book", "--dataset",
                             "synthetic", "--model", "resnet18", "--epochs", "2", "-o", f"checkpoint_dir={ckpt}",
                             "-o", "checkpoint_every_steps=3", "-o", "timeout_s=60", "--results-dir", str(results)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    marker = checkpoint.marker_of(ckpt / checkpoint.FILENAME)
    assert wait_for(lambda: marker.is_file() or _job(env, job)["JobState"] in ENDED, 300, 0.2), \
        "no checkpoint was written"
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], env=env, check=True, timeout=30)

    hastened = []

    def finished() -> bool:  # the requeued run has started (its own first line) and ended
        state = _job(env, job)
        if state["JobState"] == "PENDING" and state["Reason"] == "BeginTime" and not hastened:
            # Slurm holds a requeued job for cred_expire (120 s) so that its relaunch does not meet the run before's
            # revoked credential; the test waits 3 s instead. Not 0: slurmd compares credentials in whole seconds,
            # and a relaunch in the second of the revocation is refused ("Job 3 already killed, do not launch
            # batch job"), which ended the job without its requeued run.
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now+3"], env=env, timeout=30)
            hastened.append(True)
        # the job's state alone once read as ended after the requeue before the requeued run had begun (records
        # ['interrupted'] only, its output ending at the requeue): so the requeued run's own first line as well
        rerun = out.exists() and "(requeued 1 times)" in out.read_text()
        return rerun and state["JobState"] in ENDED and int(state["Restarts"]) >= 1

    assert wait_for(finished, 400, 1), f"job {job} did not end after a requeue: {_job(env, job)}"
    time.sleep(1)
    log = out.read_text() if out.exists() else ""
    assert "launch: requeue 1 of at most 3: the ranks checkpointed at epoch" in log, log[-3000:]
    assert "accel: checkpointed on SIGUSR1 for a requeue" in log and "Traceback" not in log, log[-3000:]
    statuses = [r["status"] for r in records(results)]
    assert statuses.count("interrupted") == 1 and statuses.count("ok") == 1, (statuses, log[-3000:])
    (done,) = [r for r in records(results) if r["status"] == "ok"]
    (stopped,) = [r for r in records(results) if r["status"] == "interrupted"]
    assert done["metrics"]["resumed_from"]["checkpoint"] == str(ckpt / checkpoint.FILENAME)
    assert done["metrics"]["resumed_from"]["previous_run"] == stopped["run_id"] != done["run_id"]  # linked
    assert checkpoint.load(ckpt / checkpoint.FILENAME)["complete"]
    assert json.loads((ckpt / requeue.LEDGER).read_text())["count"] == 1
    assert done["dist"]["launcher"] == "srun" and done["dist"]["world_size"] == 2
    if image:  # srun outermost, one container per task (in each of the two runs), the ranks in the image
        assert "\n+ srun " in log and log.count("+ podman run --rm") == 4, log[-3000:]
        assert done["env"]["image"]["target"] == "cpu" and done["env"]["executable"].startswith("/opt/venv/")
