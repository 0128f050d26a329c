"""`accel data fetch|generate|verify`: datasets in torchvision's on-disk formats, apart from the experiments'."""

from __future__ import annotations

from pathlib import Path

import click

from pipelines.core.cli.args import PathArg, fail as _fail
from pipelines.core.errors import ConfigError


@click.group()
def data() -> None:
    """Fetch, generate or verify datasets (torchvision on-disk formats)."""


ROOT_HELP = "The data folder (what --data-root of `accel run` reads)."


@data.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--root", type=PathArg(), default=Path("data"), show_default=True, help=ROOT_HELP)
def fetch(names: tuple[str, ...], root: Path) -> None:
    """Download with torchvision's dataset classes (needs internet), verify, record checksums."""
    from pipelines.core.data import files, writing

    for name in names:
        files.spec(name)
    for name in names:
        try:
            folder = writing.fetch(name, root)
        except (OSError, RuntimeError) as exc:  # torchvision raises RuntimeError when offline or on a bad MD5
            _fail(f"could not fetch {name} ({exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}); "
                  f"check the network, or run `accel data generate {name} --root {root}` for offline data")
        click.echo(f"{name}: real data in {folder}, checksums recorded")


@data.command()
@click.argument("name")
@click.option("--root", type=PathArg(), default=Path("data"), show_default=True, help=ROOT_HELP)
@click.option("--train", type=int, default=2048, show_default=True, help="Training samples to write.")
@click.option("--test", type=int, default=512, show_default=True, help="Test samples to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the generated images.")
def generate(name: str, root: Path, train: int, test: int, seed: int) -> None:
    """Write small files in the dataset's true format, with a learnable class signal."""
    from pipelines.core.data import generator

    folder = generator.generate(name, root, train, test, seed)
    click.echo(f"{name}: generated {train} train / {test} test samples in {folder} (data_source=generated)")


@data.command()
@click.argument("names", nargs=-1)
@click.option("--root", type=PathArg(), default=Path("data"), show_default=True, help=ROOT_HELP)
def verify(names: tuple[str, ...], root: Path) -> None:
    """Check datasets: torchvision's digests (real data) or the checksum list (generated), and the format."""
    from pipelines.core.data import files

    present = [n for n in files.FILES if (root / files.spec(n).folder / files.ORIGIN).is_file()]
    if not names and not present:
        raise ConfigError(f"no dataset under {root}; {files.fix_hint('fashion_mnist', root)}")
    for name in names or present:
        checked = files.verify(name, root)
        click.echo(f"{name}: {len(checked)} files OK ({files.source(name, root)} data)")
