"""The hosts a launch runs on: a program installed on this host, a HOSTS list's syntax, a host name resolved,
an address this host holds, and one check run on every node whose first refusal becomes the launcher's.

Standard library only: with IMAGE the host may have a bare python3 (the image holds torch).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import subprocess
from typing import Callable

from pipelines.core.distributed.knobs import REPO, KnobError, Knobs

HOSTS_PATTERN = re.compile(r"^[A-Za-z0-9._-]+(:[1-9][0-9]*)?(,[A-Za-z0-9._-]+(:[1-9][0-9]*)?)*$")


def installed(program: str) -> bool:
    path = shutil.which(program)
    return path is not None and os.access(path, os.X_OK)


def resolve(name: str, hosts: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except OSError:
        raise KnobError(f"HOSTS={hosts}: host {name} does not resolve") from None


def is_this_host(addr: str) -> bool:
    """An address this host holds (a port there is ours to check)."""
    if addr == "localhost" or addr.startswith("127."):
        return True
    with socket.socket() as sock:
        try:
            sock.bind((addr, 0))
        except OSError:
            return False
    return True


def per_node(knobs: Knobs, command: list[str], what: str, where: Callable[[str], str]) -> None:
    """Run a `_container.sh --check` on every node; the first node's refusal becomes this one's."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode == 0:
        return
    # An mpirun output tag ([1,0]<stderr>:) inside a line comes away (under load one can land at the end of
    # another rank's line); the tag that starts a line stays: it names the rank.
    output = re.sub(r"(?<=[^\n])\[\d+,\d+\]<std(?:out|err)>:", "", done.stdout + done.stderr)
    found = re.search(r"^.*?launch: error: (.*)$", output, re.M)
    if found:
        raise KnobError(where(found.group(0)) + found.group(1))
    last = output.strip().splitlines()[-1] if output.strip() else f"exit {done.returncode}"
    raise KnobError(f"IMAGE={knobs.get('IMAGE')}: the pre-flight {what} failed ({last}); check that every node "
                    "is reachable (RSH_AGENT, ssh)")
