"""Hostile input to the commands added since issue 31's first pass: hmb lab up|down|status|exec,
--hosts lab|FILE on run, sweep, study run and check, hmb check -n/--threads, hmb slurm (--time,
--study, counts, the #SBATCH words, --hosts), scripts/slurm-lab.sh, hmb settings --threshold and
the CSV hmb export writes.

The rule checked everywhere: ONE line naming the problem, exit status 2, no traceback, nothing
written (the test's directory is compared before and after). Nothing here creates a lab or
launches MPI: every input is refused before that, and the lab's commands run with the functions
that would touch the machine replaced by ones that fail the test.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

import hmb
from hmb.run import check, launch, slurm
from hmb import cli
from hmb.lab import nodes as lab
from _planted import metric, result, run, write

REPO = Path(__file__).resolve().parents[1]


def _tree(root: Path) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = None if p.is_dir() or not p.is_file() else p.stat().st_mtime_ns
    return out


def refused(capsys, argv: list, why: str, root: Path | None = None) -> str:
    """cli.main(argv) gives exit 2, one stderr line holding `why`, no traceback, and leaves
    root's tree as it was."""
    before = _tree(root) if root else None
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:      # argparse's errors (hmb's one-line style, _Parser.error)
        rc = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, out, err)
    assert why in lines[0], lines[0]
    if root is not None:
        assert _tree(root) == before, "something was written"
    return lines[0]


CONFIG = """[sweep]
mpis = ["mpich"]
output = "results/c.jsonl"
[[bench]]
name = "p2p"
ranks = 2
args = { mode = "latency", sizes = "8", iters = 10 }
"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory with a sweep config (what a command writes lands here)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(CONFIG)
    return tmp_path


# ------------------------------------------------------------------ the hostfile reader (--hosts)

def _file(content: bytes):
    def make(d: Path) -> str:
        (d / "hf").write_bytes(content)
        return str(d / "hf")
    return make


def _fifo(d: Path) -> str:
    os.mkfifo(d / "hf")
    return str(d / "hf")


def _link(target: str):
    def make(d: Path) -> str:
        (d / "hf").symlink_to(target)
        return str(d / "hf")
    return make


def _loop(d: Path) -> str:
    (d / "l1").symlink_to(d / "l2")
    (d / "l2").symlink_to(d / "l1")
    return str(d / "l1")


def _huge(d: Path) -> str:
    with open(d / "hf", "wb") as f:    # sparse: no 16 MB written
        f.truncate(launch.HOSTFILE_MAX_BYTES + 1)
    return str(d / "hf")


# (id, --hosts value or a maker of it in a directory, what the one line says)
HOSTILE_HOSTS = [
    ("empty-value", "", "--hosts: empty"),
    ("blank-value", "  ", "--hosts: empty"),
    ("empty-file", _file(b""), "no host in the file"),
    ("comments-only", _file(b"# nodes\n\n   \n"), "no host in the file"),
    ("binary", _file(b"\xff\xfe\x00\x01binary"), "line 1: not UTF-8 text (byte 0xff)"),
    ("latin-1", _file(b"node1\nn\xe9ud2\n"), "line 2: not UTF-8 text (byte 0xe9)"),
    ("nul-in-name", _file(b"a\x00b\n"), "'a\\x00b' is not a host name"),
    ("ssh-option", _file(b"-oProxyCommand=touch /tmp/pwned\nb\n"), "'-oProxyCommand=touch' is not a host name"),
    ("shell-semicolon", _file(b"a;touch x\n"), "'a;touch' is not a host name"),
    ("shell-substitution", _file(b"$(id)\n"), "'$(id)' is not a host name"),
    ("backticks", _file(b"`id`\n"), "'`id`' is not a host name"),
    ("comma-two-hosts", _file(b"a,b\nc\n"), "'a,b' is not a host name"),
    ("unicode", _file("n\u0153ud1\n".encode()), "is not a host name"),
    ("label-of-64", _file(b"a" * 64 + b"\n"), "is not a host name"),
    ("name-of-100k", _file(b"a" * 100000 + b"\n"), "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is not"),
    ("slots-without-host", _file(b":4\n"), "':4' is not a host name"),
    ("dot-dot-path", "../no/such/hostfile", "readable hostfile (No such file or directory)"),
    ("directory", lambda d: str(d), "a directory"),
    ("fifo", _fifo, "not a regular file"),
    ("dev-zero-link", _link("/dev/zero"), "not a regular file"),
    ("symlink-loop", _loop, "Too many levels of symbolic links"),
    ("over-16-MB", _huge, "more than a hostfile's 16 MB"),
    ("lab-empty-name", "lab:", "lab name ''"),
    ("lab-dot-dot", "lab:../x", "lab name '../x'"),
    ("lab-ssh-option", "lab:-oProxyCommand=x", "lab name '-oProxyCommand=x'"),
]

HOSTS_COMMANDS = {   # each command that takes --hosts, as far as it gets without launching
    "run": lambda h, d: ["run", "p2p", "--dry-run", "--hosts", h],
    "sweep": lambda h, d: ["sweep", "c.toml", "--dry-run", "--hosts", h],
    "study-run": lambda h, d: ["study", "run", "seed004-async", "--hosts", h, "-o", d / "st"],
    "check": lambda h, d: ["check", "--quick", "--hosts", h],
    "slurm": lambda h, d: ["slurm", "c.toml", "--nodes", "1", "--ranks-per-node", "2", "--threads", "1", "--hosts", h],
}


@pytest.mark.parametrize("command", list(HOSTS_COMMANDS))
@pytest.mark.parametrize("value, why", [c[1:] for c in HOSTILE_HOSTS], ids=[c[0] for c in HOSTILE_HOSTS])
def test_a_hostile_hosts_value_is_one_line_before_anything(here, capsys, command, value, why):
    """A host named '-oProxyCommand=...' reached mpiexec -hosts (and ssh's command line), 'a,b'
    became two hosts, a FIFO or /dev/zero blocked for ever, --hosts '' was ignored, and study run
    wrote its directory before a missing hostfile was named."""
    d = here / "in"
    d.mkdir()
    h = value(d) if callable(value) else value
    refused(capsys, HOSTS_COMMANDS[command](h, here), why, here)


def test_sweep_overwrite_keeps_the_results_when_hosts_is_bad(here, capsys):
    """--overwrite deleted the results, then the missing hostfile was named."""
    (here / "results").mkdir()
    out = write(here / "results" / "c.jsonl", [run("a", "p2p")])
    kept = out.read_bytes()
    refused(capsys, ["sweep", "c.toml", "--overwrite", "--hosts", "nohosts"], "readable hostfile", here)
    assert out.read_bytes() == kept


def test_a_hostfile_as_tools_write_it_is_read(tmp_path):
    f = tmp_path / "hf"
    # srun hostname writes a host once per task; slots in both dialects; CRLF; case
    f.write_bytes(b"# cluster\r\nnode1 slots=4\r\nnode2:4\r\n\r\nnode1\r\nNODE2\r\nn-3.example.org # the third\r\n"
                  b"10.0.0.4\r\nnode_5\r\n")
    h = launch.parse_hosts(str(f))
    assert h.names == ["node1", "node2", "n-3.example.org", "10.0.0.4", "node_5"] and h.hostfile == str(f)


def test_a_hostfile_of_100k_hosts_is_read_quickly(tmp_path):
    f = tmp_path / "hf"
    f.write_text("".join(f"node{i}\n" for i in range(100000)) + "node7\n")
    t = time.monotonic()
    h = launch.parse_hosts(str(f))
    assert len(h.names) == 100000 and h.names[:2] == ["node0", "node1"]
    assert time.monotonic() - t < 10      # about 0.2 s; a bound, not a timing


# ------------------------------------------------------------------ hmb lab

@pytest.fixture
def no_machine(monkeypatch, tmp_path):
    """Nothing of the machine is touched: a command that would run `ip`, `nsenter`..., or make a
    lab fails the test (a refusal that regressed must not create namespaces)."""
    def touched(*a, **k):
        raise AssertionError(f"the lab would have touched the machine: {a[:1]}")
    monkeypatch.setattr(lab, "run", touched)
    monkeypatch.setattr(lab, "can_make_labs", touched)
    monkeypatch.setenv(lab.BASE_VAR, str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


BAD_NAMES = [("empty", ""), ("upper-case", "A"), ("dot-dot", "../x"), ("semicolon", "a;rm"), ("unicode", "n\u0153ud"),
             ("eleven-chars", "a" * 11), ("ssh-option", "-oProxyCommand=x"), ("digit-first", "1abc"),
             ("newline", "ab\ncd")]


@pytest.mark.parametrize("verb", ["up", "up --dry-run", "down", "status", "exec"])
@pytest.mark.parametrize("name", [c[1] for c in BAD_NAMES], ids=[c[0] for c in BAD_NAMES])
def test_lab_names(no_machine, capsys, verb, name):
    """lab status --name ../x said so on stdout with exit 1 (as for a lab that is not up)."""
    argv = ["lab", *verb.split(), f"--name={name}"] + (["n1", "--", "true"] if verb == "exec" else [])
    refused(capsys, argv, "lab name", no_machine)


BAD_LAYOUTS = [
    ("nodes-0", ["--nodes", "0"], "a lab has 2 to 16 nodes"),
    ("nodes-1", ["--nodes", "1"], "a lab has 2 to 16 nodes"),
    ("nodes-negative", ["--nodes", "-1"], "a lab has 2 to 16 nodes"),
    ("nodes-17", ["--nodes", "17"], "a lab has 2 to 16 nodes"),
    ("nodes-overflow", ["--nodes", "1" * 30], "a lab has 2 to 16 nodes"),
    ("nodes-nan", ["--nodes", "nan"], "invalid int value: 'nan'"),
    ("subnet-empty", ["--subnet", ""], "--subnet: empty"),
    ("subnet-word", ["--subnet", "x"], "does not appear to be an IPv4 or IPv6 network"),
    ("subnet-shell", ["--subnet", "10.77.5.0/24;id"], "does not appear to be"),
    ("subnet-public", ["--subnet", "8.8.8.0/24"], "expected a private IPv4 network of at least /24"),
    ("subnet-too-small", ["--subnet", "10.77.5.0/25"], "of at least /24"),
    ("subnet-ipv6", ["--subnet", "fd00::/64"], "expected a private IPv4 network"),
    ("subnet-host-bits", ["--subnet", "10.77.5.1/24"], "has host bits set"),
]


@pytest.mark.parametrize("dry", [False, True], ids=["up", "up-dry-run"])
@pytest.mark.parametrize("args, why", [c[1:] for c in BAD_LAYOUTS], ids=[c[0] for c in BAD_LAYOUTS])
def test_lab_up_options(no_machine, capsys, dry, args, why):
    """--subnet '' made the default lab (it was read as not given)."""
    refused(capsys, ["lab", "up", *(["--dry-run"] if dry else []), *args], why, no_machine)


def test_a_large_subnet_is_laid_out_at_once(no_machine, capsys):
    """Listing a /8's addresses took 47 s and 1.4 GB."""
    t = time.monotonic()
    assert cli.main(["lab", "up", "--dry-run", "--subnet", "10.0.0.0/8", "--nodes", "3"]) == 0
    out = capsys.readouterr().out
    assert time.monotonic() - t < 5 and "this machine 10.0.0.254" in out and "10.0.0.3 " in out
    assert lab.layout("hx", 2, "10.77.5.0/24", cpus=[0]).head_addr == "10.77.5.254"


def _state(**changes) -> str:
    good = {"name": "hx", "subnet": "10.77.5.0/24", "head_addr": "10.77.5.254",
            "nodes": [{"name": "hx-n1", "addr": "10.77.5.1", "uts": "u1", "cpus": [0]},
                      {"name": "hx-n2", "addr": "10.77.5.2", "uts": "u2", "cpus": [1]}]}
    for k, v in changes.items():
        if k.startswith("node_"):
            good["nodes"][0][k[5:]] = v
        else:
            good[k] = v
    return __import__("json").dumps(good)


HOSTILE_STATES = [
    ("not-json", "{", "unreadable state"),
    ("deep-nesting", "[" * 100000 + "]" * 100000, "nested too deeply"),
    ("node-ssh-option", _state(node_name="-oProxyCommand=x"), "node 1 is named '-oProxyCommand=x'"),
    ("node-address-shell", _state(node_addr="1;id"), "'1;id' does not appear to be an IPv4 or IPv6 address"),
    ("nodes-a-string", _state(nodes="abc"), "unreadable state"),
    ("another-lab", _state(name="hy"), "not lab hx's state"),
    ("cpus-words", _state(node_cpus=["0;id"]), "a list of CPU numbers expected"),
    ("extra-field", _state(node_shell="x"), "unreadable state"),
]


@pytest.mark.planted_json("lab.json")
@pytest.mark.parametrize("how", ["hosts", "exec"])
@pytest.mark.parametrize("text, why", [c[1:] for c in HOSTILE_STATES], ids=[c[0] for c in HOSTILE_STATES])
def test_a_hostile_lab_state_is_refused(no_machine, capsys, how, text, why):
    """lab.json's names reach mpiexec -hosts and the agent: a hand-edited one is refused, and a
    deeply nested one raised RecursionError."""
    d = no_machine / "state" / "hx"
    d.mkdir(parents=True)
    (d / "lab.json").write_text(text)
    argv = ["run", "p2p", "--dry-run", "--hosts", "lab:hx"] if how == "hosts" else \
        ["lab", "exec", "--name", "hx", "hx-n1", "--", "true"]
    refused(capsys, argv, why, no_machine)


def test_a_lab_state_that_is_a_fifo_is_refused(no_machine, capsys):
    d = no_machine / "state" / "hx"
    d.mkdir(parents=True)
    os.mkfifo(d / "lab.json")
    refused(capsys, ["run", "p2p", "--dry-run", "--hosts", "lab:hx"], "not a regular file", no_machine)


def test_slurm_lab_script_checks_the_options_before_installing(tmp_path):
    """scripts/slurm-lab.sh up installed Slurm with apt-get before a bad --name was named."""
    if os.geteuid() != 0:
        pytest.skip("slurm-lab.sh up stops at its root check first")
    calls = tmp_path / "calls"
    fake = tmp_path / "hmb"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in *--dry-run*) exit 2;; esac\nexit 0\n')
    fake.chmod(0o755)
    r = subprocess.run([str(REPO / "scripts" / "slurm-lab.sh"), "up", "--name", "../x"], capture_output=True,
                       text=True, env={**os.environ, "HMB": str(fake), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 2 and calls.read_text() == "lab up --dry-run --name ../x\n", (r.stderr, calls.read_text())
    r = subprocess.run([str(REPO / "scripts" / "slurm-lab.sh"), "bogus"], capture_output=True, text=True,
                       env={**os.environ, "HMB": str(fake)}, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown command 'bogus'" in r.stderr


# ------------------------------------------------------------------ hmb run, hmb check: counts

COUNTS = [
    ("run-ranks-0", ["run", "p2p", "--dry-run", "-n", "0"], "-n must be at least 1 (got 0)"),
    ("run-ranks-overflow", ["run", "p2p", "--dry-run", "-n", "99999999999"], "-n must be at most 1,048,576 (got 99,999,999,999)"),
    ("run-threads-0", ["run", "p2p", "--dry-run", "--threads", "0"], "--threads must be at least 1 (got 0)"),
    ("run-threads-257", ["run", "p2p", "--dry-run", "--threads", "257"], "--threads must be at most 256 (got 257)"),
    ("run-threads-after", ["run", "p2p", "--dry-run", "--", "--threads", "99999999999"], "--threads must be at most 256"),
    ("run-repeats-0", ["run", "p2p", "--dry-run", "--repeats", "0"], "--repeats must be at least 1 (got 0)"),
    ("run-repeats-huge", ["run", "p2p", "--dry-run", "--repeats", "99999999999"], "--repeats must be at most 10,000"),
    ("run-ranks-per-node-0", ["run", "p2p", "--dry-run", "--ranks-per-node", "0"], "--ranks-per-node must be at least 1"),
    ("run-ranks-per-node-huge", ["run", "p2p", "--dry-run", "--ranks-per-node", "1" * 20], "--ranks-per-node must be at most 1,048,576"),
    ("run-json-empty", ["run", "p2p", "--dry-run", "--json", ""], "--json: empty value"),
    ("run-metric-empty", ["run", "p2p", "--dry-run", "--metric", ""], "--metric: empty value"),
    ("sweep-ranks-per-node-0", ["sweep", "c.toml", "--dry-run", "--ranks-per-node", "0"], "--ranks-per-node must be at least 1"),
    ("check-ranks-1", ["check", "-n", "1"], "at least 2"),
    ("check-ranks-overflow", ["check", "-n", "99999999999"], "-n must be at most 1,048,576"),
    ("check-threads-0", ["check", "--threads", "0"], "--threads must be at least 1 (got 0)"),
    ("check-threads-257", ["check", "--threads", "257"], "--threads must be at most 256 (got 257)"),
    ("check-json-empty", ["check", "--json", ""], "--json: empty value"),
]


@pytest.mark.parametrize("argv, why", [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS])
def test_counts_are_bounded(here, capsys, argv, why):
    """-n 99999999999 reached mpiexec (check tried for 35 s), --repeats 99999999999 --dry-run
    printed for ever, --threads 10^11 became OMP_NUM_THREADS, --json '' wrote no record."""
    refused(capsys, argv, why, here)


@pytest.mark.parametrize("text, tag", [("/x/../../etc/hosts", "hosts"), ("/x/h.txt", "h"), ("/x/.hidden", "hidden"),
                                       ("/x/a b;c", "a_b_c")])
def test_the_check_record_of_a_hostfile_stays_in_results(text, tag):
    """The default record was results/check-MPI-<--hosts with ':' replaced>.json: a hostfile
    '../../x' put it outside results/."""
    hosts = launch.Hosts(text, ["a"], hostfile=text)
    assert check.default_record("mpich", hosts) == f"results/check-mpich-{tag}.json"
    lb = lab.layout("hx", 2, "10.77.5.0/24", cpus=[0])
    assert check.default_record("openmpi", launch.Hosts("lab:hx", lb.hostnames, lab=lb)) == \
        "results/check-openmpi-lab-hx.json"
    assert check.default_record("mpich") == "results/check-mpich.json"


# ------------------------------------------------------------------ hmb slurm

SLURM = ["slurm", "c.toml", "--nodes", "1", "--ranks-per-node", "2", "--threads", "1"]

BAD_TIMES = [
    ("hours-25", "1-25:61:61", "25 hours (at most 23"),
    ("hours-24", "1-24:00:00", "24 hours (at most 23"),
    ("minutes-60", "00:60:00", "60 minutes (at most 59"),
    ("seconds-60", "00:00:60", "60 seconds (at most 59"),
    ("mm-ss-seconds-99", "10:99", "99 seconds"),
    ("days-minutes-60", "2-3:60", "60 minutes"),
    ("negative", "-5", "expected minutes, MM:SS"),
    ("empty", "", "expected minutes"),
    ("arabic-digits", "\u0661\u0662:\u0660\u0660", "expected minutes"),
    ("trailing-newline", "01:00:00\n", "01:00:00\\n"),
    ("one-digit-field", "5:7", "expected minutes"),
    ("days-only", "1-", "expected minutes"),
    ("overflow", "9" * 20 + "-00", "expected minutes"),
    ("beyond-slurm", "999999999-00", "beyond Slurm's largest limit"),
    ("unlimited-word", "UNLIMITED", "expected minutes"),
    ("shell", "1:00;id", "expected minutes"),
]


@pytest.mark.parametrize("value, why", [c[1:] for c in BAD_TIMES], ids=[c[0] for c in BAD_TIMES])
def test_slurm_time(here, capsys, value, why):
    """--time 1-25:61:61 was written into #SBATCH --time (the pattern took any two digits)."""
    refused(capsys, SLURM + ["--time", value], "--time", here)
    refused(capsys, SLURM + ["--time", value], why, here)


@pytest.mark.parametrize("value, minutes", [("0", 0), ("90", 90), ("10:30", 10.5), ("99:59:59", 5999 + 59 / 60),
                                            ("7-0", 7 * 1440), ("1-23:59", 2879), ("1-23:59:59", 2879 + 59 / 60),
                                            ("00:00:00", 0)])
def test_slurm_time_as_sbatch_reads_it(value, minutes):
    assert slurm.time_minutes(value) == pytest.approx(minutes)


BAD_SLURM = [
    ("partition-empty", ["--partition", ""], "--partition ''"),
    ("account-empty", ["--account", ""], "--account ''"),
    ("account-shell", ["--account", "$(id)"], "--account '$(id)'"),
    ("job-name-newline", ["--job-name", "x\n#SBATCH --wrap=id"], "--job-name"),
    ("job-name-semicolon", ["--job-name", "x;id"], "--job-name 'x;id'"),
    ("nodes-0", ["--nodes", "0"], "at least 1"),
    ("nodes-overflow", ["--nodes", "1" * 20], "at most 1,048,576"),
    ("results-empty", ["--results", ""], "slurm --results: empty value"),
    ("mpi-empty", ["--mpi", ""], "slurm --mpi: empty value"),
    ("mpi-shell", ["--mpi", "mpich;id"], "unknown MPI 'mpich;id'"),
    ("output-empty", ["-o", ""], "slurm -o: give a file name"),
]


@pytest.mark.parametrize("args, why", [c[1:] for c in BAD_SLURM], ids=[c[0] for c in BAD_SLURM])
def test_slurm_options(here, capsys, args, why):
    """--partition '' and --account '' were dropped (no #SBATCH line) instead of refused."""
    refused(capsys, SLURM + args, why, here)


def test_slurm_study_refusals_leave_nothing(here, capsys):
    refused(capsys, ["slurm", "--study", "", "--nodes", "1", "--ranks-per-node", "1", "--threads", "1"],
            "slurm --study: empty value", here)
    refused(capsys, ["slurm", "--study", "../x", "--nodes", "1", "--ranks-per-node", "1", "--threads", "1"],
            "study file not found", here)
    # seed004 needs 28 ranks as published: the study's directory was written, then refused
    refused(capsys, ["slurm", "--study", "seed004-async", "--nodes", "2", "--ranks-per-node", "1", "--threads", "2"],
            "needs more than --nodes × --ranks-per-node = 2 ranks", here)
    assert not (here / "results").exists()


def test_slurm_study_runs_study_report_and_a_refusal_keeps_the_earlier_files(here, capsys):
    argv = ["slurm", "--study", "seed004-async", "--nodes", "2", "--ranks-per-node", "1", "--threads", "2"]
    assert cli.main(argv + ["--fit", "-o", "job.sbatch"]) == 0
    text = (here / "job.sbatch").read_text()
    d = "results/study-seed004-async-slurm"
    assert f'"$HMB" study report {d}\n' in text and '"$HMB" report ' not in text
    files = {p.name: p.read_bytes() for p in (here / d).iterdir()}
    assert set(files) == {"config.toml", "study.toml", "fit.txt"}
    capsys.readouterr()
    small = ["slurm", "--study", "seed004-async", "--nodes", "1", "--ranks-per-node", "1", "--threads", "1", "--fit"]
    refused(capsys, small, "needs more than")      # the files are rewritten, then put back as they were
    assert {p.name: p.read_bytes() for p in (here / d).iterdir()} == files


# ------------------------------------------------------------------ hmb settings, hmb export

@pytest.mark.parametrize("value, shown", [("default", "the preset default (no variable set"),
                                          ("default+nocma", "with single copy off"),
                                          ("16K+nocma", "a threshold of 16384 B with single copy off"),
                                          (" 24K ", "a threshold of 24576 B")])
def test_settings_takes_its_own_presets(capsys, value, shown):
    """--threshold refused 'default' and '+nocma', the presets its own table lists."""
    assert cli.main(["settings", "--mpi", "mpich", "--threshold", value]) == 0
    out = capsys.readouterr().out
    assert shown in out
    if "nocma" in value:
        assert "single copy off: MPIR_CVAR_CH4_CMA_ENABLE=0" in out


@pytest.mark.parametrize("value, why", [("+nocma", "'' is not a byte count"),
                                        ("default+nocma+nocma", "'default+nocma' is not a byte count"),
                                        ("\udcff", "'\\udcff' is not a byte count"),
                                        ("1" * 23, "is not a byte count"), ("-1", "'-1' is not a byte count"),
                                        ("1025G", "bytes is no eager threshold")])
def test_settings_threshold_refusals(capsys, value, why):
    line = refused(capsys, ["settings", "--threshold", value], why)
    assert "''" not in line.replace("'' is", "")     # the value is quoted once


@pytest.mark.planted_json("f.jsonl")
def test_export_csv_cells_are_not_formulas(tmp_path, capsys):
    """A params value '=HYPERLINK(...)' was exported as is: a spreadsheet runs it (CSV injection;
    OWASP: start such a cell with a quote). Numbers (-1.5) stay numbers; hmb.load is unchanged."""
    params = {"size_bytes": 8, "a": '=HYPERLINK("http://x","c")', "b": "+1", "c": "-2+3", "d": "@SUM(A1)",
              "e": "\tx", "f": "\rx", "g": "plain"}
    f = write(tmp_path / "f.jsonl", [run("a", "p2p"), result("a", "p2p", params, {"latency": metric(-1.5)})])
    assert cli.main(["export", "--csv", str(tmp_path / "x.csv"), str(f)]) == 0
    import pandas as pd
    df = pd.read_csv(tmp_path / "x.csv")
    row = df.iloc[0]
    for col in "abcdef":
        assert row[col] == "'" + params[col], (col, row[col])
    assert row["g"] == "plain" and row["median"] == -1.5
    loaded = hmb.load(f, warn=False).iloc[0]
    assert loaded["a"] == params["a"] and loaded["c"] == "-2+3"


@pytest.mark.parametrize("verb", ["up", "up --dry-run", "down", "status"])
def test_lab_commands_take_no_arguments_after_dashdash(no_machine, capsys, verb):
    """`hmb lab down -- --name X` took down hmblab: what followed -- was dropped unsaid."""
    refused(capsys, ["lab", *verb.split(), "--", "--name", "X"], "unexpected arguments after --: --name X", no_machine)


def test_slurm_lab_script_takes_down_the_lab_its_options_name_when_interrupted(tmp_path):
    """`scripts/slurm-lab.sh up --name=X`, then SIGTERM: the trap read only `--name X`, so it
    took down the default lab and left X up with its daemons."""
    if os.geteuid() != 0:
        pytest.skip("slurm-lab.sh up stops at its root check first")
    import signal
    calls = tmp_path / "calls"
    fake = tmp_path / "hmb"
    # `lab up --slurm` waits until it is told to stop, as a long `up` does
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in *--slurm*) trap \'echo "up: TERM" >> {calls}; '
                    f'exit 130\' TERM; echo started >> {calls}; while :; do sleep 0.05; done;; esac\nexit 0\n')
    fake.chmod(0o755)
    bin_dir = tmp_path / "bin"      # every package reads as installed: nothing is installed
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\necho 'install ok installed'\n")
    (bin_dir / "dpkg-query").chmod(0o755)
    env = {**os.environ, "HMB": str(fake), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for form in (["--name=labx"], ["--name", "labx"]):
        calls.write_text("")
        p = subprocess.Popen([str(REPO / "scripts" / "slurm-lab.sh"), "up", *form, "--nodes", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        end = time.monotonic() + 30
        while "started" not in calls.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        lines = calls.read_text().splitlines()
        assert p.returncode == 130 and "interrupted: lab labx is down" in err, (form, err, lines)
        assert "up: TERM" in lines and lines[-1] == "lab down --name labx", (form, lines)
