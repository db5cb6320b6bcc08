"""python/hmb/settings.py: presets and thresholds -> the variables that move the eager switch."""
import pytest

from hmb import settings


def test_mpich_threshold_moves_cell_cma_and_pack_together():
    env = settings.threshold_env("mpich", 64 << 10)
    assert env == {"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": "65536",
                   "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD": "65536",
                   "MPIR_CVAR_CH4_PACK_BUFFER_SIZE": "65536"}
    # a small cell keeps the default pack buffer (it must hold at least one cell)
    assert settings.threshold_env("mpich", 4096)["MPIR_CVAR_CH4_PACK_BUFFER_SIZE"] == "16384"


def test_openmpi_raises_max_send_size_only_above_its_default():
    assert settings.threshold_env("openmpi", 16384) == {"OMPI_MCA_btl_sm_eager_limit": "16384"}
    assert settings.threshold_env("openmpi", 1 << 20) == {"OMPI_MCA_btl_sm_eager_limit": "1048576",
                                                          "OMPI_MCA_btl_sm_max_send_size": "1048576"}


def test_impi_cells():
    assert set(settings.threshold_env("impi", 1 << 20)) == {"I_MPI_SHM_CELL_FWD_SIZE", "I_MPI_SHM_CELL_BWD_SIZE"}


@pytest.mark.parametrize("mpi,t", [("mpich", 100), ("mpich", 8193), ("mpich", 64 << 20),
                                   ("openmpi", 0), ("openmpi", 64 << 20), ("impi", 1000)])
def test_impossible_threshold_is_one_line_value_error(mpi, t):
    with pytest.raises(ValueError) as e:
        settings.threshold_env(mpi, t)
    assert mpi in str(e.value) and "\n" not in str(e.value)


def test_unknown_family():
    with pytest.raises(ValueError, match="unknown MPI family"):
        settings.presets("lam")


@pytest.mark.parametrize("mpi", settings.FAMILIES)
def test_presets_default_is_empty_and_named_ones_use_threshold_env(mpi):
    table = settings.presets(mpi)
    assert table["default"] == {}
    assert table["16K"] == settings.threshold_env(mpi, 16384)
    assert {"default", "16K", "64K", "1M"} <= set(table)


def test_resolve_preset_or_raw_threshold():
    assert settings.resolve("openmpi", "64K") == ("64K", {"OMPI_MCA_btl_sm_eager_limit": "65536",
                                                          "OMPI_MCA_btl_sm_max_send_size": "65536"})
    assert settings.resolve("openmpi", 24576)[1] == {"OMPI_MCA_btl_sm_eager_limit": "24576"}
    assert settings.resolve("mpich", "24K")[1]["MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"] == "24576"
    with pytest.raises(ValueError, match="unknown setting 'fast'"):
        settings.resolve("mpich", "fast")
