"""Energy of a repeat, where a counter is readable: RAPL on the CPU, NVML on NVIDIA GPUs.

- CPU: the kernel's powercap interface, /sys/class/powercap/intel-rapl:N/energy_uj (one package domain
  per socket; AMD's Zen parts use the same interface). The counters wrap at max_energy_range_uj, which
  is handled. They are usually readable by root only since 2020 (CVE-2020-8694).
- GPU: NVML's total energy counter (`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver
  loaded; Volta and later) through nvidia-ml-py, for the GPUs this process sees.

`Meter.start()` then `Meter.stop(samples)` gives the record's `energy` field: joules per domain, the total,
joules per sample, or `{"measured": false, "reason": "not measurable here: ..."}` naming why (no powercap
folder in a VM or container, a counter only root may read, no NVML). Nothing is estimated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")


def _rapl_domains(root: Path = POWERCAP) -> list[Path]:
    """Package-level RAPL domains (intel-rapl:0, intel-rapl:1, ...; not their sub-domains intel-rapl:0:0)."""
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)


def _read_uj(domain: Path) -> int:
    return int((domain / "energy_uj").read_text())


class Meter:
    def __init__(self, device_type: str = "cpu", root: Path = POWERCAP):
        self.device_type, self.root = device_type, root
        self.reason: str | None = None
        self._cpu: dict[Path, int] = {}
        self._gpu: dict[int, int] = {}
        self._nvml = None

    def start(self) -> None:
        self._cpu, self._gpu, self.reason = {}, {}, None
        domains = _rapl_domains(self.root)
        if not self.root.is_dir():
            self.reason = f"no {self.root} (no RAPL powercap interface: a VM, a container, or not Linux)"
        elif not domains:
            self.reason = f"{self.root} has no RAPL package domain"
        else:
            try:
                self._cpu = {d: _read_uj(d) for d in domains}
            except PermissionError:
                self.reason = f"{domains[0] / 'energy_uj'} is readable by root only"
            except (OSError, ValueError) as exc:
                self.reason = f"{domains[0] / 'energy_uj'} cannot be read ({exc})"
        if self.device_type == "cuda":
            self._start_gpu()

    def _start_gpu(self) -> None:
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self._gpu = {i: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for i, h in enumerate(handles)}
        except ImportError:
            self._gpu_reason = "nvidia-ml-py is not installed"
        except Exception as exc:  # NVMLError subclasses: a counter this GPU or driver does not offer
            self._gpu_reason = f"NVML: {exc}"

    def stop(self, samples: int | None) -> dict[str, Any]:
        joules: dict[str, float] = {}
        for domain, before in self._cpu.items():
            after = _read_uj(domain)
            if after < before:  # wrapped
                after += int((domain / "max_energy_range_uj").read_text())
            joules[f"cpu:{domain.name}"] = (after - before) / 1e6
        if self._nvml is not None:
            for index, before in self._gpu.items():
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
                joules[f"gpu:{index}"] = (self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle) - before) / 1e3
        if not joules:
            reasons = [r for r in (self.reason, getattr(self, "_gpu_reason", None)) if r]
            return {"measured": False, "reason": "not measurable here: " + "; ".join(reasons or ["no counter"])}
        total = sum(joules.values())
        return {"measured": True, "joules": round(total, 3), "domains": {k: round(v, 3) for k, v in joules.items()},
                "joules_per_sample": round(total / samples, 6) if samples else None,
                **({"partial": self.reason} if self.reason and self.device_type == "cuda" else {})}
