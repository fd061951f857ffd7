"""cuda/collectives.cu's error record (cuda/error_record.h) under concurrent writers, on its host
build: the first wait that times out claims the record and writes it whole (code last, released
after the details); every other wait that times out leaves it alone, and every wait still spinning
gives up once the code is set, so one timeout ends every channel of the call."""

import subprocess
import time

import numpy as np
import pytest

from commbench.errors import OK
from commbench.kernels.host import compiler
from commbench.sources import CUDA_DIR
from kernel_threads import Case, Node, needs_compiler


RACE = r"""
#include "error_record.h"
#include <atomic>
#include <cstdio>
#include <thread>
// A writer on every core, released together round after round (a spin barrier), each recording its
// own number in every field of a fresh record; the last line: torn records, records without code 1.
int main() {
    const int threads = std::max(2u, std::thread::hardware_concurrency()), rounds = 200000;
    static long long error[6];
    std::atomic<long long> arrived{0};
    long long torn = 0, unclaimed = 0;
    auto barrier = [&](long long& phase) {
        arrived.fetch_add(1);
        ++phase;
        while (arrived.load() < threads * phase) {}
    };
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
        writers.emplace_back([&, t] {
            long long phase = 0;
            for (int r = 0; r < rounds; ++r) {
                barrier(phase);  // a fresh record
                record_error(error, 100 + t, 100 + t, 100 + t, 100 + t, 100 + t);
                barrier(phase);  // every writer done: writer 0 checks and clears it
                if (t == 0) {
                    unclaimed += error[0] != 1;
                    for (int k = 2; k < 6; ++k) torn += error[k] != error[1];
                    for (int k = 0; k < 6; ++k) error[k] = 0;
                }
            }
        });
    for (auto& w : writers) w.join();
    std::printf("%lld %lld\n", torn, unclaimed);
    return 0;
}
"""


@needs_compiler
def test_concurrent_writers_leave_one_whole_record(tmp_path):
    source, program = tmp_path / "race.cc", tmp_path / "race"
    source.write_text(RACE)
    build = subprocess.run([compiler(), "-std=c++17", "-O2", "-pthread", "-include", "vector", "-include", "algorithm",
                            f"-I{CUDA_DIR}", str(source), "-o",
                            str(program)], capture_output=True, text=True, timeout=300)
    assert build.returncode == OK, build.stderr
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert run.returncode == OK, run.stderr
    torn, unclaimed = map(int, run.stdout.split())
    assert (torn, unclaimed) == (0, 0)  # every round: code 1 and all five fields from one writer
    # (the check-then-set record it replaced tore ~2 % of these rounds on this 2-core machine)


@needs_compiler
@pytest.mark.parametrize("kind", ["ring_all_reduce", "tree_all_reduce"])
def test_one_timeout_ends_every_channel_and_names_one_of_them(kind):
    """Rank 1 of 3 calls with 4 channels (threads), the others never do: all four wait, the call
    returns within the timeout (not four timeouts in a row) and the record is one channel's, whole."""
    node = Node(3, channels=4, timeout_s=0.3)
    case = Case(node, kind, "float32", "sum", 1 << 18, 4, False, np.random.default_rng(5))
    start = time.monotonic()
    [code] = node.threads(lambda r: node.host_call(case.calls[r]), ranks=[1])
    elapsed = time.monotonic() - start
    code_word, rank, channel, step, peer, waited = node.error(1)
    assert code == code_word == 1 and 0.3 <= elapsed < 3
    assert rank == 1 and channel in range(4) and waited == 0 and peer in (0, 2)
    assert node.error(0)[0] == node.error(2)[0] == 0
