"""Run one command and report its wall time and peak memory as one JSON line.

    python -S bench/launch.py OUTPUT TIMEOUT -- COMMAND...

Why a launcher: the peak RSS the kernel reports for a child (wait4's ru_maxrss)
includes the memory it had between fork and exec, i.e. a copy of its parent's.
Forked straight from the benchmark (which hosts kubesim, ~200 MB), every client
would "peak" at the benchmark's size. This script is started with -S (no site
packages, ~10 MB), forks the client itself, and reports the client's own figures.
Stdlib only: it runs outside the bench package on purpose.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time


def main(argv: list[str]) -> int:
    output, timeout, command = argv[0], float(argv[1]), argv[3:]
    assert argv[2] == "--" and command, "usage: launch.py OUTPUT TIMEOUT -- COMMAND..."
    timed_out = threading.Event()
    with open(output, "wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

        def kill() -> None:
            timed_out.set()
            process.send_signal(signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    print(
        json.dumps(
            {
                "wall": wall,
                "returncode": process.returncode,
                "timed_out": timed_out.is_set(),
                "maxrss_kb": usage.ru_maxrss,
                "user_cpu": usage.ru_utime,
                "system_cpu": usage.ru_stime,
                "switches": usage.ru_nvcsw,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
