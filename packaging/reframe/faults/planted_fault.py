# A planted fault must fail the check: hmb-bench's --inject (TEST ONLY) flips one received byte at
# an iteration, hmb-bench's data validation catches it (exit 3), and ReFrame reports the check
# failed with hmb-bench's own message naming the benchmark, point, iteration and rank.
#
#   reframe -C packaging/reframe/settings.py -c packaging/reframe/faults -r    # fails, on purpose
#
# Kept apart from the library's directory so that `-c packaging/reframe` runs only checks that
# should pass.
#
# SPDX-License-Identifier: MIT

import os

import reframe as rfm
import reframe.utility as util

hmb_checks = util.import_module_from_file(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'hmb_checks.py')
)


@rfm.simple_test
class hmb_planted_fault_check(hmb_checks.hmb_benchmark):
    '''p2p latency at 8 and 64K with one received byte corrupted at iteration 3: fails.'''

    #: The fault to plant (``hmb-bench --inject``).
    #:
    #: :type: :class:`str`
    #: :default: ``'corrupt:3'``
    inject = 'corrupt:3'
    bench = 'p2p'
    point = 'p2p/latency/8,64K (planted fault)'
    descr = point
    bench_opts = ['--mode', 'latency', '--sizes', '8,64K']
    units = {'latency_us': 'us'}
    tags = {'hmb', 'fault'}
