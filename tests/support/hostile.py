"""Source code shared by hostile executors in more than one test file."""

# Forks ``children`` processes that each touch ``mb`` MB and hold it for
# ``hold_s`` seconds; the parent waits for them all. Under a per-process
# memory limit every child fits; only a cap on the whole invocation stops it.
# ``comm`` renames the children (seen in /proc/PID/comm) so a test can find
# them on the host.
FORK_AND_HOLD = '''
import ctypes, os, time

def fork_and_hold(children, mb, comm=None, hold_s=60):
    kids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            if comm:
                ctypes.CDLL(None).prctl(15, comm, 0, 0, 0)
            hold = bytearray(mb * 1024 * 1024)
            for i in range(0, len(hold), 4096):
                hold[i] = 1
            time.sleep(hold_s)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    return children * mb
'''
