"""python/hmb/run/settings.py: presets and thresholds -> the variables that move the eager switch."""
import pytest

from hmb.run import settings


def test_mpich_threshold_moves_cell_cma_and_pack_together():
    env = settings.shm_env("mpich", 64 << 10)
    assert env == {"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": "65536",
                   "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD": "65536",
                   "MPIR_CVAR_CH4_PACK_BUFFER_SIZE": "65536"}
    # a small cell keeps the default pack buffer (it must hold at least one cell)
    assert settings.shm_env("mpich", 4096)["MPIR_CVAR_CH4_PACK_BUFFER_SIZE"] == "16384"


def test_openmpi_raises_max_send_size_only_above_its_default():
    assert settings.shm_env("openmpi", 16384) == {"OMPI_MCA_btl_sm_eager_limit": "16384"}
    assert settings.shm_env("openmpi", 1 << 20) == {"OMPI_MCA_btl_sm_eager_limit": "1048576",
                                                          "OMPI_MCA_btl_sm_max_send_size": "1048576"}


def test_impi_cells():
    assert set(settings.shm_env("impi", 1 << 20)) == {"I_MPI_SHM_CELL_FWD_SIZE", "I_MPI_SHM_CELL_BWD_SIZE"}


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
                                                          "OMPI_MCA_btl_sm_max_send_size": "65536",
                                                          "UCX_RNDV_THRESH": "65536",
                                                          "OMPI_MCA_btl_tcp_eager_limit": "65536",
                                                          "FI_OFI_RXM_BUFFER_SIZE": "65536",
                                                          "FI_OFI_RXM_SAR_LIMIT": "65536"})
    assert settings.resolve("openmpi", 24576)[1]["OMPI_MCA_btl_sm_eager_limit"] == "24576"
    assert settings.resolve("mpich", "24K")[1]["MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"] == "24576"
    with pytest.raises(ValueError, match="unknown setting 'fast'"):
        settings.resolve("mpich", "fast")


def test_nocma_suffix_adds_single_copy_off():
    label, env = settings.resolve("openmpi", "16K+nocma")
    assert label == "16K+nocma"
    assert env == {**settings.threshold_env("openmpi", 16384), "OMPI_MCA_smsc": "^cma"}
    assert env["OMPI_MCA_btl_sm_eager_limit"] == "16384"
    assert settings.resolve("mpich", "default+nocma") == ("default+nocma", {"MPIR_CVAR_CH4_CMA_ENABLE": "0"})
    with pytest.raises(ValueError, match="single copy"):
        settings.resolve("impi", "default+nocma")
    with pytest.raises(ValueError, match="unknown setting"):
        settings.resolve("mpich", "huge+nocma")


def test_sweep_settings_axis_expands_with_library_variables(tmp_path, monkeypatch):
    from hmb.run import sweep
    monkeypatch.setenv("HMB_BENCH_OVERRIDE", "true")
    cfg_path = tmp_path / "s.toml"
    cfg_path.write_text('[sweep]\nmpis = ["mpich", "openmpi"]\nseed = 1\n'
                        '[[bench]]\nname = "proto"\nsettings = ["default", "16K", 24576]\n')
    specs = sweep.expand(sweep.load(str(cfg_path)))
    by = {(s.mpi, s.settings): s for s in specs}
    assert len(specs) == 6 and len({s.tag for s in specs}) == 6
    assert by[("mpich", "default")].env_added == {}
    assert by[("mpich", "16K")].env_added == settings.threshold_env("mpich", 16384)
    assert by[("openmpi", "24576")].env_added == settings.threshold_env("openmpi", 24576)
    assert by[("openmpi", "24576")].env_added["OMPI_MCA_btl_tcp_eager_limit"] == "24576"
    assert by[("openmpi", "16K")].point()["settings"] == "16K"


def test_sweep_settings_axis_rejects_unknown_setting(tmp_path, monkeypatch):
    from hmb.run import sweep
    monkeypatch.setenv("HMB_BENCH_OVERRIDE", "true")
    cfg_path = tmp_path / "s.toml"
    cfg_path.write_text('[sweep]\nseed = 1\n[[bench]]\nname = "proto"\nsettings = ["fast"]\n')
    with pytest.raises(sweep.ConfigError, match="settings: mpich: unknown setting 'fast'"):
        sweep.expand(sweep.load(str(cfg_path)))


# ---- network paths -------------------------------------------------------------------------

def test_mpich_network_paths_ucx_and_ofi():
    assert settings.network_env("mpich", 65536) == {
        "UCX_RNDV_THRESH": "65536",                       # ch4:ucx
        "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD": "65536",     # ch4:ofi, MPICH's own handshake
        "FI_OFI_RXM_BUFFER_SIZE": "65536", "FI_OFI_RXM_SAR_LIMIT": "65536"}   # the rxm provider's


def test_openmpi_tcp_keeps_phase1_fragment_and_send_size_consistent():
    # rndv_eager_limit (default 64K) may not exceed the eager limit; max_send_size (128K) must hold it
    assert settings.network_env("openmpi", 4096)["OMPI_MCA_btl_tcp_rndv_eager_limit"] == "4096"
    env64 = settings.network_env("openmpi", 65536)
    assert "OMPI_MCA_btl_tcp_rndv_eager_limit" not in env64 and "OMPI_MCA_btl_tcp_max_send_size" not in env64
    assert settings.network_env("openmpi", 131072).get("OMPI_MCA_btl_tcp_max_send_size") is None
    env256 = settings.network_env("openmpi", 262144)
    assert env256["OMPI_MCA_btl_tcp_eager_limit"] == env256["OMPI_MCA_btl_tcp_max_send_size"] == "262144"
    assert env256["UCX_RNDV_THRESH"] == "262144"


def test_impi_network_is_the_rxm_provider_only():
    assert settings.network_env("impi", 16384) == {"FI_OFI_RXM_BUFFER_SIZE": "16384", "FI_OFI_RXM_SAR_LIMIT": "16384"}


@pytest.mark.parametrize("mpi", settings.FAMILIES)
def test_threshold_env_is_shared_memory_and_network_together(mpi):
    env = settings.threshold_env(mpi, 16384)
    assert env == {**settings.shm_env(mpi, 16384), **settings.network_env(mpi, 16384)}
    assert len(env) == len(settings.shm_env(mpi, 16384)) + len(settings.network_env(mpi, 16384))   # no clash


@pytest.mark.parametrize("mpi", settings.FAMILIES)
def test_every_path_is_moved_or_says_why_not(mpi):
    paths = settings.network_paths(mpi)
    assert paths
    for p in paths:
        if p.env is None:
            assert p.variables(16384) == {} and p.note
        else:
            assert p.variables(16384) and set(p.variables(16384).values()) == {"16384"}
        assert p.measured or p.note    # either measured here or why not moved / not verified


def test_table_names_every_path_and_what_was_measured():
    text = settings.table(None, 4096)
    for p in settings.NETWORK_PATHS:
        assert p.path in text
    assert "UCX_RNDV_THRESH=4096" in text and "not moved (not emulated)" in text
    assert "65456-65464" in text          # btl tcp default measured here
    one = settings.table("impi", 4096)
    assert "mpich:" not in one and "impi:" in one


def test_hmb_settings_cli(capsys):
    from hmb import cli
    assert cli.main(["settings", "--mpi", "openmpi", "--threshold", "64K"]) == 0
    out = capsys.readouterr().out
    assert "OMPI_MCA_btl_tcp_eager_limit=65536" in out and "UCX_RNDV_THRESH=65536" in out
    assert cli.main(["settings", "--threshold", "lots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lots" in err
