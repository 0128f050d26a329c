"""The plain text table a run's verdict prints: columns padded to their widest cell under a dashed rule
(tabulate's "simple" look). Written here, not with tabulate: the run's last lines must print in every runtime
a run happens in, and the frozen IPEX runtime (containers/locks/ipex.lock, .venv-ipex) carries no table
library."""

from __future__ import annotations

from typing import Sequence


def render(headers: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *lines)]
    row = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([row(headers), row(["-" * w for w in widths]), *map(row, lines)])
