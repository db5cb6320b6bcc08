"""Library settings that move the eager/rendezvous switch (SPEC §3.7, §4), per MPI family.

A threshold is given in the library's own unit, which includes its per-message header: the
largest message that still goes eagerly is the threshold minus that header (MPICH 5.0.2:
cell size 8192 -> switch between 8100 and 8128 B; Open MPI 5.0.11: btl_sm_eager_limit 4096 ->
between 4016 and 4032 B). `hmb-bench proto --test probe` run with a preset's variables shows
where the switch really went; a preset that does not move it is reported so (docs/metrics.md).

Families are the launcher dialects of python/hmb/mpi.py: mpich, openmpi, impi.
"""
from __future__ import annotations

import re

FAMILIES = ("mpich", "openmpi", "impi")

# Named presets besides "default" (no variable set: the library's own choice).
PRESET_THRESHOLDS = {"4K": 4 << 10, "16K": 16 << 10, "64K": 64 << 10, "256K": 256 << 10, "1M": 1 << 20}

# MPICH 5.0.2 defaults (read through MPI_T): cell 8192, CMA threshold 8192, pack buffer 16384;
# the pack buffer must hold at least one cell.
_MPICH_PACK_DEFAULT = 16 << 10
# Open MPI 5.0.11 btl/sm default max_send_size ("phase 2" fragments): an eager fragment may
# not exceed it.
_OMPI_MAX_SEND_DEFAULT = 32 << 10

# What each family's variables can take (bytes, inclusive): below the minimum the header
# leaves no payload; above the maximum the shared-memory queues (64 MPICH cells, Open MPI's
# 16 MB segment) no longer hold a message.
_LIMITS = {"mpich": (1 << 10, 1 << 20), "openmpi": (1 << 10, 4 << 20), "impi": (1 << 10, 64 << 20)}
_ALIGN = {"mpich": 64, "openmpi": 8, "impi": 64}

# Variables that turn single copy (CMA) off: then a receiver can no longer complete a large
# message by itself, and `proto --view recv-early` shows the eager limit (docs/metrics.md).
# Written as a suffix of a setting: "default+nocma", "16K+nocma".
NO_SINGLE_COPY = {"mpich": {"MPIR_CVAR_CH4_CMA_ENABLE": "0"}, "openmpi": {"OMPI_MCA_smsc": "^cma"}}
NO_SINGLE_COPY_SUFFIX = "+nocma"

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _family(mpi: str) -> str:
    if mpi not in FAMILIES:
        raise ValueError(f"unknown MPI family '{mpi}' (choose from {', '.join(FAMILIES)})")
    return mpi


def parse_bytes(text) -> int:
    """Bytes from 16384, "16384", "16K", "1M" (powers of two, like hmb-bench sizes)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = re.fullmatch(r"\s*([0-9]+)\s*([KMG]?)B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"'{text}' is not a byte count (write e.g. 16384, 16K or 1M)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def threshold_env(mpi: str, threshold_bytes: int) -> dict[str, str]:
    """The variables that move this family's eager/rendezvous switch to threshold_bytes.

    MPICH: the shared-memory cell size, the CMA single-copy threshold and the pack buffer move
    together (SPEC §4: a larger cell alone still hands messages over CMA from 8 KB on).
    Open MPI: btl_sm_eager_limit, and btl_sm_max_send_size when the limit exceeds it.
    Intel MPI: the forward and backward shared-memory cell sizes (not verified here: no Intel
    MPI run was made for this table). Raises ValueError (one line) for a threshold the library
    cannot take."""
    family = _family(mpi)
    t = int(threshold_bytes)
    lo, hi = _LIMITS[family]
    align = _ALIGN[family]
    if t < lo or t > hi or t % align:
        raise ValueError(f"{family}: eager threshold {t} B not possible (needs a multiple of {align} B "
                         f"between {lo} and {hi} B)")
    if family == "mpich":
        return {"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": str(t),
                "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD": str(t),
                "MPIR_CVAR_CH4_PACK_BUFFER_SIZE": str(max(t, _MPICH_PACK_DEFAULT))}
    if family == "openmpi":
        env = {"OMPI_MCA_btl_sm_eager_limit": str(t)}
        if t > _OMPI_MAX_SEND_DEFAULT:
            env["OMPI_MCA_btl_sm_max_send_size"] = str(t)
        return env
    return {"I_MPI_SHM_CELL_FWD_SIZE": str(t), "I_MPI_SHM_CELL_BWD_SIZE": str(t)}


def presets(mpi: str) -> dict[str, dict[str, str]]:
    """Named presets -> environment variables for this family ("default": none set)."""
    family = _family(mpi)
    out = {"default": {}}
    for name, t in PRESET_THRESHOLDS.items():
        try:
            out[name] = threshold_env(family, t)
        except ValueError:
            continue    # a preset this family cannot take is not offered
    return out


def resolve(mpi: str, setting) -> tuple[str, dict[str, str]]:
    """A sweep's `settings` entry -> (label, variables): a preset name of this family, or a raw
    threshold (16384, "24K"), either with the suffix "+nocma" (single copy off). Raises ValueError
    naming the problem."""
    if isinstance(setting, str) and setting.endswith(NO_SINGLE_COPY_SUFFIX):
        base = setting[:-len(NO_SINGLE_COPY_SUFFIX)]
        if _family(mpi) not in NO_SINGLE_COPY:
            raise ValueError(f"{mpi}: setting '{setting}': no known way to turn single copy off")
        _, env = resolve(mpi, base)
        return setting, {**env, **NO_SINGLE_COPY[mpi]}
    table = presets(mpi)
    if isinstance(setting, str) and setting in table:
        return setting, dict(table[setting])
    try:
        t = parse_bytes(setting)
    except ValueError:
        raise ValueError(f"{mpi}: unknown setting '{setting}' (presets: {', '.join(table)}; "
                         f"or a threshold such as 24K)") from None
    return str(setting), threshold_env(mpi, t)
