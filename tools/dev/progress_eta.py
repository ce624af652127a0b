#!/usr/bin/python3
"""How good a command's progress estimates are: runs it under a pseudo-terminal (so it draws its
progress line), timestamps every redraw, and prints for each step the estimated over the real
time left at 25%, 50% and 75% of the step (docs/search.md, "Progress").

Usage: tools/dev/progress_eta.py COMMAND [ARGS...]
  e.g. tools/dev/progress_eta.py build/dtsim search tools/examples/gpt3_175b_1024gpu.json -o /tmp/s

A step runs from its first redraw to its last (a step's end is drawn at once). At each fraction
the estimate is the last redraw's "left" less the time since that redraw; nan where no redraw
had a rate yet, or the step had already ended.
"""

import math
import os
import pty
import re
import select
import sys
import time

LINE = re.compile(rb"(\w[\w ]*): (\d+) of (\d+) \((\d+)%\), ([\d.]+)/s, (.*?) left")


def seconds(text):
    """Progress::FormatSeconds's text back to seconds ("?" is nan)."""
    for pattern, scale in ((r"([\d.]+) s$", (1,)), (r"(\d+) min (\d+) s$", (60, 1)),
                           (r"(\d+) h (\d+) min$", (3600, 60))):
        m = re.match(pattern, text)
        if m:
            return sum(float(g) * s for g, s in zip(m.groups(), scale))
    return math.nan


def redraws(command):
    """(time, step, done, total, left) per progress redraw of the command, and its wall time."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    found, start = [], time.monotonic()
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if fd not in ready:
                continue
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        now = time.monotonic()
        for piece in re.split(rb"[\r\n]", data):
            m = LINE.match(piece)
            if m:
                found.append((now, m.group(1).decode(), int(m.group(2)), int(m.group(3)),
                              m.group(6).decode()))
    _, status = os.waitpid(pid, 0)
    return found, time.monotonic() - start, os.waitstatus_to_exitcode(status)


def main(command):
    if not command:
        print(__doc__)
        return 2
    events, wall, code = redraws(command)
    print(f"command {wall:.2f} s, exit status {code}")
    for step in dict.fromkeys(e[1] for e in events):
        drawn = [e for e in events if e[1] == step]
        start, end = drawn[0][0], drawn[-1][0]
        print(f"{step}: {end - start:.2f} s from its first redraw, {len(drawn)} redraws, "
              f"last {drawn[-1][2]} of {drawn[-1][3]}")
        for fraction in (0.25, 0.5, 0.75):
            at = start + fraction * (end - start)
            last = [e for e in drawn if e[0] <= at][-1]
            real = end - at
            estimate = seconds(last[4]) - (at - last[0])
            ratio = estimate / real if real > 0 else math.nan
            print(f"  {round(fraction * 100)}%: estimate {estimate:.2f} s, real {real:.2f} s, "
                  f"ratio {ratio:.2f} ({last[2]} of {last[3]})")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
