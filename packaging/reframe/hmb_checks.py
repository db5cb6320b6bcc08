# HMB (Hybrid MPI Benchmarks) as a ReFrame test library.
#
# Written as ReFrame's own libraries are (hpctestlib): a fixture that provides hmb-bench for the
# current environment (built with CMake against the environment's MPI, or a prebuilt one from a
# module or PATH), a base class for one hmb-bench launch, one parameterised check per benchmark
# family. Every number ReFrame logs comes from hmb-bench's own JSON results (`--json FILE`),
# validated against HMB's schema, never from the text table; a launch whose data validation
# failed is a failed check whose message is hmb-bench's own (benchmark, point, iteration, rank).
#
#   reframe -C packaging/reframe/settings.py -c packaging/reframe -r
#
# docs/toolkit.md, "Running HMB from ReFrame".
#
# SPDX-License-Identifier: MIT

import json
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.exceptions import ExpectedFailureError, SanityError

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The checkout this library lives in (packaging/reframe/ of an HMB source tree).
CHECKOUT = os.path.dirname(os.path.dirname(_HERE))


def _default_schema():
    '''HMB's output schema: the checkout's, else the one installed with the hmb package.'''
    path = os.path.join(CHECKOUT, 'python', 'hmb', 'data', 'schema', 'hmb-output.schema.json')
    if os.path.exists(path):
        return path
    try:
        from importlib import resources
        return str(resources.files('hmb.data').joinpath('schema').joinpath('hmb-output.schema.json'))
    except (ImportError, ModuleNotFoundError):
        return ''


def _default_references():
    '''The centre's references: $HMB_RFM_REFERENCES, else references.toml beside this file.'''
    return os.environ.get('HMB_RFM_REFERENCES',
                          os.path.join(_HERE, 'references.toml'))


def _load_toml(path):
    try:
        import tomllib
    except ImportError:             # Python < 3.11
        import tomli as tomllib

    with open(path, 'rb') as f:
        return tomllib.load(f)


def _bound(value):
    return None if value in ('none', None) else float(value)


def load_references(path, point, units):
    '''ReFrame reference entries for one point from a references file.

    The file (TOML) has one table per ``"system:partition"`` (or ``"*"``) and point label, whose
    keys are HMB metric names and whose values are ``[reference, lower, upper]``: ReFrame's
    thresholds, fractions of the reference (``"none"``: unbounded). Metrics without an entry
    have no reference there.
    '''
    if not path or not os.path.exists(path):
        return {}

    refs = {}
    for syspart, points in _load_toml(path).items():
        for metric, (value, lower, upper) in points.get(point, {}).items():
            if metric not in units:
                raise ValueError(f'{path}: {syspart} {point!r}: {metric!r} is not '
                                 f'a metric of this check ({", ".join(units)})')

            refs.setdefault(syspart, {})[metric] = (
                float(value), _bound(lower), _bound(upper), units[metric]
            )

    return refs


def read_records(path):
    '''The records of an HMB JSON Lines file, strictly parsed (NaN or Infinity is no JSON).'''
    def _no_constant(name):
        raise ValueError(f'{name} is not JSON')

    records = []
    with open(path, encoding='utf-8') as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue

            try:
                records.append(json.loads(line, parse_constant=_no_constant))
            except ValueError as err:
                raise SanityError(f'{path}:{lineno}: not a JSON record ({err})')

    return records


def schema_problems(records, schema_file):
    '''One line per record of `records` that does not validate against HMB's schema.'''
    import jsonschema

    if not schema_file or not os.path.exists(schema_file):
        where = schema_file or 'neither the checkout nor an installed hmb package has it'
        raise SanityError(f"HMB's output schema not found ({where}): set schema_file")
    with open(schema_file, encoding='utf-8') as f:
        schema = json.load(f)

    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for i, rec in enumerate(records, 1):
        errors = list(validator.iter_errors(rec))
        if errors:
            e = jsonschema.exceptions.best_match(errors)
            where = '/'.join(str(p) for p in e.absolute_path)
            kind = rec.get('type', '?') if isinstance(rec, dict) else 'record'
            problems.append(f'record {i} ({kind}): {where + ": " if where else ""}'
                            f'{e.message}')

    return problems


class build_hmb_bench(rfm.CompileOnlyRegressionTest):
    '''Fixture providing hmb-bench for the current environment's MPI.

    Built with CMake from the HMB checkout against the MPI the environment puts first on
    ``PATH`` (its ``mpicc``), or, where the environment names a prebuilt one (its extras'
    ``hmb_bench``, e.g. ``hmb-bench`` from a module) or :attr:`prebuilt` is set, that one.
    '''

    #: HMB source tree to build (the checkout this library is in).
    #:
    #: :type: :class:`str`
    source_dir = variable(str, value=CHECKOUT)

    #: A prebuilt hmb-bench (a path, or a name looked up on ``PATH`` inside the environment,
    #: e.g. after ``module load HMB``); empty: build it.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    prebuilt = variable(str, value='')

    #: The MPI compiler wrapper the build uses for FindMPI.
    #:
    #: :type: :class:`str`
    #: :default: ``'mpicc'``
    mpicc = variable(str, value='mpicc')

    #: The hmb-bench the checks launch (set by this fixture).
    #:
    #: :type: :class:`str`
    hmb_bench = variable(str, value='')

    build_system = 'CMake'
    sourcesdir = None

    @run_before('compile')
    def prepare_build(self):
        prebuilt = self.prebuilt or self.current_environ.extras.get('hmb_bench', '')
        if prebuilt:
            self.build_system = 'CustomBuild'
            self.build_system.commands = [
                f'echo "hmb-bench: $(command -v {prebuilt})"',
                f'{prebuilt} --version'
            ]
            self.hmb_bench = prebuilt
            return

        self.build_system.configuredir = self.source_dir
        self.build_system.builddir = 'build'
        self.build_system.config_opts = [f'-DMPI_C_COMPILER={self.mpicc}',
                                         '-DCMAKE_BUILD_TYPE=Release']
        self.build_system.max_concurrency = os.cpu_count() or 1
        self.hmb_bench = os.path.join(self.stagedir, 'build', 'hmb-bench')

    @sanity_function
    def validate_build(self):
        if self.hmb_bench == os.path.join(self.stagedir, 'build', 'hmb-bench'):
            return sn.assert_true(os.access(self.hmb_bench, os.X_OK),
                                  msg=f'no executable {self.hmb_bench} after the build')

        return sn.assert_found(r'^hmb-bench: /', self.stdout,
                               msg=f'{self.hmb_bench!r} not found in this environment')


class hmb_benchmark(rfm.RunOnlyRegressionTest):
    '''HMB benchmark test base class: one hmb-bench launch of one point.

    Derived classes set :attr:`bench`, :attr:`bench_opts`, :attr:`point` (the point's label,
    which keys the references), :attr:`expect` (parameters the result must carry) and
    :attr:`units` (the metrics logged as performance variables, with their units).
    '''

    #: The benchmark (``hmb-bench --list``).
    #:
    #: :type: :class:`str`
    bench = variable(str)

    #: The benchmark's options for this point.
    #:
    #: :type: :class:`List[str]`
    bench_opts = variable(typ.List[str], value=[])

    #: Label of the point, e.g. ``'p2p/latency/8'``: references are kept per label.
    #:
    #: :type: :class:`str`
    point = variable(str)

    #: Parameters the point's result must carry (``params`` of the result record).
    #:
    #: :type: :class:`Dict[str, object]`
    expect = variable(typ.Dict[str, object], value={})

    #: HMB metric name -> unit: the performance variables of this check.
    #:
    #: :type: :class:`Dict[str, str]`
    units = variable(typ.Dict[str, str])

    #: Measured iterations per point (``--iters``, with ``--ci-target 0``: exactly these).
    #:
    #: :type: :class:`int`
    #: :default: ``20``
    num_iters = variable(int, value=20)

    #: Warm-up iterations per point (``--warmup``).
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    num_warmup_iters = variable(int, value=2)

    #: OpenMP threads per rank (``--threads``).
    #:
    #: :type: :class:`int`
    #: :default: ``1``
    num_threads = variable(int, value=1)

    #: TEST ONLY: faults hmb-bench plants (``--inject``, e.g. ``corrupt:3``): the run must fail.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    inject = variable(str, value='')

    #: hmb-bench's watchdog for one point (``--timeout``).
    #:
    #: :type: :class:`str`
    #: :default: ``'120s'``
    point_timeout = variable(str, value='120s')

    #: How long a partition or request may stay unarrived once its wait began (``--wait-bound``;
    #: then hmb-bench ends the point with exit 3).
    #:
    #: :type: :class:`str`
    #: :default: ``'10s'``
    wait_bound = variable(str, value='10s')

    #: The JSON Lines results file hmb-bench writes (kept in the output directory).
    #:
    #: :type: :class:`str`
    json_file = variable(str, value='hmb.jsonl')

    #: HMB's output schema the results are validated against.
    #:
    #: :type: :class:`str`
    schema_file = variable(str, value=_default_schema())

    #: The centre's references (TOML; see :func:`load_references`).
    #:
    #: :type: :class:`str`
    references_file = variable(str, value=_default_references())

    #: hmb-bench's ``run_id`` of this launch (logged with every performance value, so a
    #: perflog line leads back to the JSON records it was read from).
    #:
    #: :type: :class:`str`
    hmb_run_id = variable(str, value='')

    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '10m'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    tags = {'hmb', 'benchmark'}
    maintainers = ['HMB']

    #: The fixture providing hmb-bench.
    #:
    #: :type: :class:`build_hmb_bench`
    #: :scope: *environment*
    hmb_binary = fixture(build_hmb_bench, scope='environment')

    @run_before('run')
    def set_launch(self):
        self.executable = self.hmb_binary.hmb_bench
        self.executable_opts = [
            self.bench, *self.bench_opts,
            '--threads', str(self.num_threads),
            '--iters', str(self.num_iters), '--warmup', str(self.num_warmup_iters),
            '--ci-target', '0', '--timeout', self.point_timeout, '--wait-bound', self.wait_bound,
            '--json', self.json_file
        ]
        if self.inject:
            self.executable_opts += ['--inject', self.inject]

        self.env_vars.update({
            'OMP_NUM_THREADS': str(self.num_threads),
            'OMP_PLACES': 'cores',
            'OMP_PROC_BIND': 'close'
        })
        # Launcher flags of the environment on this system (binding, PMI, root).
        self.job.launcher.options += list(
            self.current_environ.extras.get('launcher_options', [])
        )
        self.keep_files = [self.json_file]
        # The launcher's exit status, in the job's output: a scheduler without accounting
        # (Slurm without sacct: ReFrame's squeue backend) reports none.
        self.postrun_cmds = ['echo "hmb-bench exit status: $?"'] + self.postrun_cmds

    @run_after('setup')
    def set_references(self):
        self.reference = load_references(self.references_file, self.point,
                                         self.units)

    def _records(self):
        path = os.path.join(self.stagedir, self.json_file)
        if not os.path.exists(path):
            raise SanityError(f'hmb-bench wrote no {self.json_file}')

        return read_records(path)

    def _hmb_error(self):
        '''hmb-bench's own error line(s) on stderr, or its failure record's message.'''
        # 'hmb-bench: validation failed: ...', 'hmb-bench BENCH: ...' (usage), once per rank
        lines = sn.evaluate(sn.extractall(r'^(hmb-bench(?: [a-z0-9]+)?: .*)$', self.stderr, 1))
        if lines:
            return '; '.join(line.replace('hmb-bench: ', '', 1)
                             for line in dict.fromkeys(lines))

        path = os.path.join(self.stagedir, self.json_file)
        if os.path.exists(path):
            for rec in read_records(path):
                if rec.get('type') == 'failure':
                    return (f"{rec.get('kind')} failed: bench={rec.get('bench')} "
                            f"params={rec.get('params')} iteration={rec.get('iteration')} "
                            f"rank={rec.get('rank')}: {rec.get('message')}")

        return "no message from hmb-bench (see the job's stderr)"

    def _result(self):
        '''The point's result record, once the whole file has been checked (read once).'''
        if getattr(self, '_hmb_result', None) is None:
            self._hmb_result = self._checked_result()

        return self._hmb_result

    def _checked_result(self):
        records = self._records()
        problems = schema_problems(records, self.schema_file)
        if problems:
            raise SanityError(f"{self.json_file} does not validate against HMB's schema: "
                              + '; '.join(problems[:3]))

        failures = [r for r in records if r['type'] == 'failure']
        if failures:
            f = failures[0]
            raise SanityError(f"hmb-bench recorded a {f['kind']} failure: "
                              f"{f.get('message')}")

        runs = [r for r in records if r['type'] == 'run']
        results = [r for r in records if r['type'] == 'result']
        if len(runs) != 1:
            raise SanityError(f'{len(runs)} run records, expected 1')

        if runs[0].get('ranks') != self.num_tasks:
            raise SanityError(f"hmb-bench ran on {runs[0].get('ranks')} ranks, "
                              f"expected {self.num_tasks}")

        if len(results) != 1:
            raise SanityError(f'{len(results)} results, expected the one point {self.point}')

        res = results[0]
        if res.get('status') != 'ok':
            raise SanityError(f"{self.point}: {res.get('status')}: "
                              f"{res.get('reason', 'no reason given')}")

        params = res.get('params', {})
        for key, value in self.expect.items():
            if params.get(key) != value:
                raise SanityError(f'{self.point}: result has {key}={params.get(key)!r}, '
                                  f'expected {value!r}')

        for name, unit in self.units.items():
            metric = res['metrics'].get(name)
            if metric is None:
                raise SanityError(f'{self.point}: no metric {name!r} in the result')

            if metric['unit'] != unit:
                raise SanityError(f"{self.point}: {name} is in {metric['unit']!r}, "
                                  f"this check logs {unit!r}")

        self.hmb_run_id = runs[0]['run_id']
        return res

    def _known_defect(self, message):
        '''An expected failure when the environment declares a defect of its MPI that this
        point's failure is (its extras' ``known_defects``: ``points`` and ``message`` regular
        expressions, a ``reason``): a run that passes is still a plain pass.'''
        for defect in self.current_environ.extras.get('known_defects', []):
            if (re.search(defect['points'], self.point) and
                re.search(defect['message'], message)):
                raise ExpectedFailureError(f"known defect: {defect['reason']}: {message}")

    @sanity_function
    def validate_run(self):
        '''hmb-bench exited 0 (its data validation passed on every iteration) and wrote one
        result for the point, valid against HMB's schema.'''
        status = sn.evaluate(sn.extractall(r'^hmb-bench exit status: (\d+)$',
                                           self.stdout, 1, int))
        if not status:
            raise SanityError('the job recorded no exit status of hmb-bench '
                              f'(killed? {self._hmb_error()})')

        if status[-1] != 0:
            message = self._hmb_error()
            self._known_defect(message)
            raise SanityError(f'hmb-bench exited with {status[-1]}: {message}')

        self._result()
        return True

    @deferrable
    def _metric(self, name):
        value = self._result()['metrics'][name]['median']
        if value is None:
            raise SanityError(f'{self.point}: {name} has no value (no valid sample)')

        return value

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {
            name: sn.make_performance_function(self._metric(name), unit)
            for name, unit in self.units.items()
        }


def _size_bytes(text):
    '''A size as hmb-bench reads it (8, 64K, 1M): bytes.'''
    mult = {'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)


@rfm.simple_test
class hmb_p2p_check(hmb_benchmark):
    '''Point-to-point: ping-pong latency and windowed bandwidth, by message size.'''

    #: (mode, message size) of the point.
    #:
    #: :values: ``latency`` and ``bw`` at ``8`` and ``64K``
    p2p_point = parameter([('latency', '8'), ('latency', '64K'),
                           ('bw', '8'), ('bw', '64K')],
                          fmt=lambda x: f'{x[0]}_{x[1]}', loggable=True)
    bench = 'p2p'

    @run_after('init')
    def setup_point(self):
        mode, size = self.p2p_point
        self.point = self.descr = f'p2p/{mode}/{size}'
        self.bench_opts = ['--mode', mode, '--sizes', size]
        self.expect = {'mode': mode, 'size_bytes': _size_bytes(size)}
        self.units = ({'latency_us': 'us'} if mode == 'latency'
                      else {'bandwidth_MBps': 'MB/s', 'msg_rate': 'msg/s'})
        self.tags |= {'p2p'}


@rfm.simple_test
class hmb_part_check(hmb_benchmark):
    '''Partitioned point-to-point: overhead against a single send, perceived bandwidth.'''

    #: Send partitions (a multiple of the threads).
    #:
    #: :values: ``1``, ``2``
    partitions = parameter([1, 2], loggable=True)

    #: Message size.
    #:
    #: :type: :class:`str`
    #: :default: ``'256K'``
    message_size = variable(str, value='256K')

    #: Compute per iteration and thread (``--compute``).
    #:
    #: :type: :class:`str`
    #: :default: ``'100us'``
    compute = variable(str, value='100us')
    bench = 'part'

    @run_after('init')
    def setup_point(self):
        self.point = self.descr = f'part/{self.message_size}/partitions={self.partitions}'
        self.bench_opts = ['--sizes', self.message_size,
                           '--partitions', str(self.partitions),
                           '--compute', self.compute]
        self.expect = {'partitions': self.partitions,
                       'size_bytes': _size_bytes(self.message_size)}
        self.units = {'overhead': 'ratio', 'perceived_bw_MBps': 'MB/s'}
        self.tags |= {'part'}


@rfm.simple_test
class hmb_async_check(hmb_benchmark):
    '''Asynchronous progress: overlap efficiency E of non-blocking pt2pt, per progress mode.'''

    #: Progress mode: none, MPI_Test every 10 us of compute, HMB's progress thread.
    #:
    #: :values: ``none``, ``test:10``, ``thread``
    progress = parameter(['none', 'test:10', 'thread'],
                         fmt=lambda x: x.replace(':', ''), loggable=True)

    #: Message size.
    #:
    #: :type: :class:`str`
    #: :default: ``'16K'``
    message_size = variable(str, value='16K')

    #: Compute per iteration (``--compute``; fixed, not derived by ``--calc-factor``).
    #:
    #: :type: :class:`str`
    #: :default: ``'200us'``
    compute = variable(str, value='200us')
    bench = 'async'

    @run_after('init')
    def setup_point(self):
        self.point = self.descr = f'async/pt2pt/{self.message_size}/{self.progress}'
        self.bench_opts = ['--op', 'pt2pt', '--progress', self.progress,
                           '--sizes', self.message_size, '--compute', self.compute]
        self.expect = {'op': 'pt2pt', 'progress': self.progress,
                       'size_bytes': _size_bytes(self.message_size)}
        self.units = {'efficiency_pct': '%', 'efficiency_mean_pct': '%',
                      't_sync_us': 'us'}
        self.tags |= {'async'}


@rfm.simple_test
class hmb_mt_check(hmb_benchmark):
    '''MPI + threads: message rate per thread mode.'''

    #: How threads express parallelism (docs/metrics.md, mt).
    #:
    #: :values: ``shared``, ``comm``, ``tag``, ``funneled``
    mode = parameter(['shared', 'comm', 'tag', 'funneled'], loggable=True)

    #: Message size.
    #:
    #: :type: :class:`str`
    #: :default: ``'8'``
    message_size = variable(str, value='8')
    bench = 'mt'

    @run_after('init')
    def setup_point(self):
        self.point = self.descr = f'mt/rate/{self.mode}/{self.message_size}'
        self.bench_opts = ['--test', 'rate', '--mode', self.mode,
                           '--sizes', self.message_size, '--compute', '0']
        self.expect = {'test': 'rate', 'mode': self.mode,
                       'size_bytes': _size_bytes(self.message_size)}
        self.units = {'msg_rate': 'msg/s', 'per_thread_rate': 'msg/s'}
        self.tags |= {'mt'}


@rfm.simple_test
class hmb_halo3d_check(hmb_benchmark):
    '''3-D halo exchange: time per iteration and throughput, per exchange mode.'''

    #: Exchange mode.
    #:
    #: :values: ``single``, ``multiple``, ``partitioned``, ``persistent``
    mode = parameter(['single', 'multiple', 'partitioned', 'persistent'],
                     loggable=True)

    #: Bytes per face (hmb-bench rounds it to whole cells).
    #:
    #: :type: :class:`str`
    #: :default: ``'16K'``
    message_size = variable(str, value='16K')

    #: Compute per iteration and thread (``--compute``).
    #:
    #: :type: :class:`str`
    #: :default: ``'100us'``
    compute = variable(str, value='100us')
    bench = 'halo3d'

    @run_after('init')
    def setup_point(self):
        self.point = self.descr = f'halo3d/{self.mode}/{self.message_size}'
        self.bench_opts = ['--mode', self.mode, '--sizes', self.message_size,
                           '--compute', self.compute]
        self.units = {f't_iter_{self.mode}_us': 'us',
                      f'throughput_{self.mode}_MBps': 'MB/s'}
        self.tags |= {'halo3d'}
