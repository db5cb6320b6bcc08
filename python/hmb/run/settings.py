"""Library settings that move the eager/rendezvous switch (SPEC §3.7, §4), per MPI family.

A threshold is given in the library's own unit, which includes its per-message header: the
largest message that still goes eagerly is the threshold minus that header (MPICH 5.0.2:
cell size 8192 -> switch between 8100 and 8128 B; Open MPI 5.0.11: btl_sm_eager_limit 4096 ->
between 4016 and 4032 B). `hmb-bench proto --test probe` run with a preset's variables shows
where the switch really went; a preset that does not move it is reported so (docs/metrics.md).

Families are the launcher dialects of python/hmb/run/mpi.py: mpich, openmpi, impi.

A preset moves every path a family's traffic can take: shared memory (within a node) and the
network paths (between nodes, NETWORK_PATHS: MPICH over UCX or OFI, Open MPI's pml ucx, btl tcp
and mtl ofi, Intel MPI over OFI). A path no variable moves is listed with the reason and left
alone (never emulated). `hmb settings` prints the table; docs/toolkit.md cites the sources.
"""
from __future__ import annotations

import dataclasses
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


MAX_THRESHOLD = 1 << 40   # 1024G: far beyond any library's (Intel MPI's cells: 64 MB); a bound for the arithmetic


def parse_bytes(text) -> int:
    """Bytes from 16384, "16384", "16K", "1M" (powers of two, like hmb-bench sizes), at most
    MAX_THRESHOLD (1024G): a 23-digit threshold was printed back as variables."""
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        m = re.fullmatch(r"[ \t]*([0-9]{1,16})[ \t]*([KMG]?)B?[ \t]*", str(text), re.IGNORECASE)
        if not m:
            shown = str(text) if str(text).isprintable() else ascii(str(text))[1:-1]
            raise ValueError(f"'{shown[:40]}' is not a byte count (write e.g. 16384, 16K or 1M)")
        n = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if not 0 <= n <= MAX_THRESHOLD:
        raise ValueError(f"{n} bytes is no eager threshold (at most 1024G; the libraries take up to 64M)")
    return n


def shm_env(mpi: str, threshold_bytes: int) -> dict[str, str]:
    """The variables that move this family's shared-memory (within a node) eager/rendezvous
    switch to threshold_bytes.

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


# ---- Network paths (between nodes) -------------------------------------------------------
# Open MPI 5.0.11 btl/tcp defaults (ompi_info --param btl tcp --level 9): the "phase 1"
# fragment of a large message (rndv_eager_limit) must not exceed the eager limit, and an eager
# fragment must fit max_send_size.
_OMPI_TCP_RNDV_DEFAULT = 64 << 10
_OMPI_TCP_MAX_SEND_DEFAULT = 128 << 10


def _ucx(t: int) -> dict[str, str]:
    # UCX's tag-matching protocol (ucp_tag_send) switches to rendezvous at UCX_RNDV_THRESH
    # (default auto); UCX_ZCOPY_THRESH only chooses copy or zero-copy within eager: not set.
    return {"UCX_RNDV_THRESH": str(t)}


def _rxm(t: int) -> dict[str, str]:
    # libfabric's rxm utility provider (verbs;ofi_rxm, tcp;ofi_rxm): eager below
    # FI_OFI_RXM_BUFFER_SIZE less its header, segmentation (SAR) up to FI_OFI_RXM_SAR_LIMIT,
    # rendezvous above; both at T leave no SAR range: the switch is at T.
    return {"FI_OFI_RXM_BUFFER_SIZE": str(t), "FI_OFI_RXM_SAR_LIMIT": str(t)}


def _mpich_ofi(t: int) -> dict[str, str]:
    # MPICH's own handshake over OFI (default -1: only above the provider's max_msg_size, so
    # the provider decides) and the rxm provider's switch.
    return {"MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD": str(t), **_rxm(t)}


def _ompi_tcp(t: int) -> dict[str, str]:
    env = {"OMPI_MCA_btl_tcp_eager_limit": str(t)}
    if t < _OMPI_TCP_RNDV_DEFAULT:
        env["OMPI_MCA_btl_tcp_rndv_eager_limit"] = str(t)
    if t > _OMPI_TCP_MAX_SEND_DEFAULT:
        env["OMPI_MCA_btl_tcp_max_send_size"] = str(t)
    return env


@dataclasses.dataclass(frozen=True)
class NetworkPath:
    """One way a family's point-to-point traffic crosses nodes, and what moves its switch."""
    family: str
    path: str
    env: object      # threshold bytes -> variables; None: no variable moves this path's switch
    measured: str    # what HMB measured on one node ("" when not verified here)
    note: str = ""

    def variables(self, t: int) -> dict[str, str]:
        return self.env(t) if self.env else {}


NETWORK_PATHS = (
    NetworkPath("mpich", "ch4:ucx (MPICH's netmod in the PyPI wheel)", _ucx,
                "MPIR_CVAR_NOLOCAL=1 (all traffic through UCX on one node): default 5024-5032 B; "
                "UCX_RNDV_THRESH=4096 -> 4088-4096 B, 65536 -> 65528-65536 B"),
    NetworkPath("mpich", "ch4:ofi (MPICH built with libfabric)", _mpich_ofi, "",
                "the FI_OFI_RXM_* variables act under the rxm provider only; other providers "
                "(cxi, efa, psm3, opx) have their own thresholds, not set (not moved)"),
    NetworkPath("openmpi", "pml ucx", _ucx,
                "--mca pml ucx (pml_ucx_tls/devices any) on one node: default 6024-6032 B; "
                "UCX_RNDV_THRESH=4096 -> 4088-4096 B, 65536 -> 65528-65536 B"),
    NetworkPath("openmpi", "pml ob1 + btl tcp", _ompi_tcp,
                "--mca btl tcp,self on one node, 3 launches each: default 65456-65464 B; "
                "btl_tcp_eager_limit=16384 -> 16304-16312 B, 262144 -> 262064-262072 B"),
    NetworkPath("openmpi", "pml cm + mtl ofi", _rxm, "",
                "Open MPI has no eager variable on this path: the libfabric provider decides; "
                "moved under the rxm provider only (others not moved)"),
    NetworkPath("openmpi", "pml ob1 + btl ofi / btl uct", None, "",
                "by default these carry one-sided traffic only (btl_ofi_mode 0); their eager limits "
                "(btl_ofi_eager_limit, btl_uct_eager_limit) are left alone"),
    NetworkPath("impi", "ofi (rxm provider)", _rxm, "",
                "Intel MPI documents no eager-threshold variable for its OFI path: the provider's are set"),
    NetworkPath("impi", "ofi (mlx, psm3, cxi providers)", None, "",
                "their thresholds are the providers' own, not set here"),
)


def network_paths(mpi: str) -> list[NetworkPath]:
    family = _family(mpi)
    return [p for p in NETWORK_PATHS if p.family == family]


def network_env(mpi: str, threshold_bytes: int) -> dict[str, str]:
    """The variables that move this family's network paths' switches to threshold_bytes."""
    out: dict[str, str] = {}
    for p in network_paths(mpi):
        out.update(p.variables(int(threshold_bytes)))
    return out


def threshold_env(mpi: str, threshold_bytes: int) -> dict[str, str]:
    """Every path's variables for threshold_bytes: shared memory (shm_env, which also checks
    that the library can take it) and the network paths (network_env)."""
    return {**shm_env(mpi, threshold_bytes), **network_env(mpi, threshold_bytes)}


def parse_setting(text: str) -> tuple[int | None, bool]:
    """`hmb settings --threshold`: a threshold or preset as a sweep's `settings` axis takes it
    ("default", "16K", "24576", each with an optional "+nocma") -> (bytes or None for
    "default", single copy off). ValueError naming the problem (the option refused the
    "default" and "+nocma" its own table lists)."""
    base = str(text).strip(" \t")     # as parse_bytes: a trailing newline is refused
    nocma = base.endswith(NO_SINGLE_COPY_SUFFIX)
    if nocma:
        base = base[:-len(NO_SINGLE_COPY_SUFFIX)]
    return (None if base == "default" else _threshold(base)), nocma


def _threshold(text) -> int:
    """A threshold of at least 1 B: at 0 hmb settings printed variables that looked usable (UCX,
    OFI and TCP limits of 0) for a switch no library's eager path takes."""
    n = parse_bytes(text)
    if n == 0:
        raise ValueError("0 B is no eager threshold (the largest message sent eagerly: at least 1 B; "
                         "give a preset such as 16K, or default)")
    return n


def table(mpi: str | None = None, threshold_bytes: int | None = 16 << 10, nocma: bool = False) -> str:
    """`hmb settings`: presets, and per path the variables a threshold sets (None: the preset
    "default", none) and what was measured of them here; nocma: the variables that turn single
    copy off too."""
    what = "the preset default (no variable set: each library's own switch)" if threshold_bytes is None \
        else f"a threshold of {threshold_bytes} B"
    lines = [f"presets: default (nothing set), {', '.join(PRESET_THRESHOLDS)}; or a threshold such as 24K; "
             f"suffix {NO_SINGLE_COPY_SUFFIX} turns single copy off (MPICH, Open MPI)",
             f"variables for {what}{' with single copy off' if nocma else ''}:"]
    for family in ([_family(mpi)] if mpi else FAMILIES):
        lines.append(f"{family}:")
        if nocma:
            off = NO_SINGLE_COPY.get(family)
            lines.append("  single copy off: " + (" ".join(f"{k}={v}" for k, v in off.items()) if off
                                                  else "no known way (not emulated)"))
        if threshold_bytes is None:
            continue
        try:
            shm = " ".join(f"{k}={v}" for k, v in shm_env(family, threshold_bytes).items())
        except ValueError as e:
            shm = f"not possible ({e})"
        lines.append(f"  shared memory: {shm}")
        for p in network_paths(family):
            v = " ".join(f"{k}={x}" for k, x in p.variables(threshold_bytes).items())
            lines.append(f"  {p.path}: {v or 'not moved (not emulated)'}")
            state = f"measured here: {p.measured}" if p.measured else "not verified here (no such path on this machine)"
            lines.append(f"      {state}" + (f"; {p.note}" if p.note else ""))
    return "\n".join(lines) + "\n"


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
    try:
        _threshold(t)
    except ValueError as e:
        raise ValueError(f"{mpi}: setting '{setting}': {e}") from None
    return str(setting), threshold_env(mpi, t)
