"""The per-GPU record shared by the nvidia-smi parsers and the local NVML adapter.

Both ``nvidia-smi -q -x`` (parsed on any machine) and NVML (read on the node itself) end up
as a :class:`GpuSnapshot`, so the ``gpus`` fact group has one input shape. ``None`` means the
tool printed ``N/A`` or did not print the field at all; it never means zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class GpuRecord:
    index: int
    uuid: str = ""
    pci_bus_id: str = ""  # normalised upper-case "0000:3B:00.0"
    name: str = ""
    serial: str = ""
    board_part_number: str = ""  # what an RMA asks for, with the serial
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    ecc_mode: str | None = None  # "Enabled" | "Disabled"
    ecc_volatile_sbe: int | None = None
    ecc_volatile_dbe: int | None = None
    ecc_aggregate_sbe: int | None = None
    ecc_aggregate_dbe: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    recovery_action: str | None = None  # "None", "Reset", "Reboot", "Drain P2P", "Drain and Reset"
    mig_mode: str | None = None  # "Enabled" | "Disabled"
    mig_devices: list[dict[str, Any]] = field(default_factory=list)
    # {gpu_instance:int, compute_instance:int, profile:str, memory_total_mib:int|None,
    #  memory_used_mib:int|None, uuid:str}
    processes: list[dict[str, Any]] = field(default_factory=list)
    # {pid:int, name:str, type:str, used_memory_mib:int|None, gpu_instance:int|None,
    #  compute_instance:int|None}
    errors: list[str] = field(default_factory=list)  # field-level errors: "Unknown Error", "ERR!"


@dataclass
class GpuSnapshot:
    """What one ``nvidia-smi`` (or NVML) look at the node found."""

    # ok | no_devices | driver_unreachable | gpu_lost | nvml_mismatch | unknown_error | unparsed
    status: str = "ok"
    message: str = ""  # the tool's own error text, verbatim, when status is not ok
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[GpuRecord] = field(default_factory=list)
    lost_pci_ids: list[str] = field(default_factory=list)  # "Unable to determine ... for GPU X"
    source_format: str = ""  # xml | text | table | list | error | nvml

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuSnapshot:
        names = {f.name for f in fields(GpuRecord)}
        gpus = [
            GpuRecord(**{k: v for k, v in g.items() if k in names})
            for g in data.get("gpus", [])
            if isinstance(g, dict)
        ]
        top = {f.name for f in fields(cls)} - {"gpus"}
        return cls(gpus=gpus, **{k: v for k, v in data.items() if k in top})
