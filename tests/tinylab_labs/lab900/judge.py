"""Grader-side checks for tests of the judge process (``grader.judge.isolated``): what a file's bytes
make them do stands for what a hostile model can make a real check (onnxruntime, a compiler) do."""
import os
import subprocess
import sys
import time


def check_size(spec, data, tolerance):
    """At least 4 bytes passes; some contents make the check misbehave as a hostile file could."""
    if data == b"boom":
        raise RuntimeError("hostile bytes")
    if data == b"crash":
        import ctypes
        ctypes.string_at(0)  # a segmentation fault, as a bug in a C library would give
    if data == b"hang":
        while True:
            time.sleep(0.1)
    if data == b"bloat":
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))
    if data == b"child":  # a check that starts a process of its own (a compiler, a timing harness)
        done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=60)
        return [] if done.stdout.strip() == "42" else [f"the child said {done.stdout!r}"]
    if data == b"noise":
        print("chatter on stdout")  # must not corrupt the judge's answers
        os.write(1, b"{not json\n")
        return []
    if data == b"many":
        return [f"problem {i}: " + "x" * 5000 for i in range(1000)]  # bounded by the judge
    return [] if len(data) >= 4 else [f"only {len(data)} bytes"]


def check_returned(spec, data, tolerance, returned=None):
    """What the case returned in the kernel must be the saved file's size (``{"bytes": n}``)."""
    if returned != {"bytes": len(data)}:
        return [f"the case returned {returned!r}; its file holds {len(data)} bytes"]
    return []


def check_student_function(spec, data, tolerance):
    """``f(n) == n * n`` for n = 0..spec["n"], computed by the student's code (the file: its source) in a
    student process; the judge also reports what the grader measured of that process when asked."""
    from util.student_process import ChannelError, StudentProcess

    problems = []
    try:
        with StudentProcess.start(spec["harness"],
                                  seconds=spec.get("seconds", 60)) as student:
            student.send({"code": True}, data=data)
            reply, _ = student.receive(timeout=30)
            if reply.get("loaded") is not True:
                return [f"the code did not load: {str(reply.get('raised'))[:200]}"]
            for n in range(spec.get("n", 5)):
                student.send({"call": n})
                reply, _ = student.receive(timeout=30)
                if reply.get("value") != n * n or type(reply.get("value")) is not int:
                    problems.append(f"f({n}) is {str(reply.get('value', reply.get('raised')))[:80]}, not {n * n}")
                    break
            if spec.get("stats"):
                problems += [f"stats {sorted(student.stats())}"]
    except ChannelError as exc:
        problems.append(f"the student process failed: {exc}")
    return problems


def readable(paths):
    """Indices of the ``paths`` whose content this process can read (a hidden file reads empty or fails)."""
    found = []
    for index, path in enumerate(paths):
        try:
            with open(path, "rb") as handle:
                if handle.read(1):
                    found.append(index)
        except OSError:
            continue
    return found


def check_probe(spec, data, tolerance):
    """For tests of the walls: what this judge can read of ``spec["paths"]``, and what the student's
    code (the file: source defining ``probe()``) found and did in a student process; ``spec["spin"]``
    also reports the grader's CPU measurement of it, paused and running. Each finding is one 'problem'
    line of JSON, so the test reads them all."""
    import json
    import time

    from util.student_process import ChannelError, StudentProcess

    out = [json.dumps({"judge": readable(spec["paths"])})]
    try:
        with StudentProcess.start("lab900.student_harness:serve", seconds=60) as student:
            student.send({"code": True}, data=data)
            student.receive(timeout=30)
            student.send({"call": 0})
            reply, _ = student.receive(timeout=60)
            out.append(json.dumps({"student": reply}))
            if spec.get("spin"):
                student.pause()
                first = student.stats()["cpu_seconds"]
                time.sleep(1.0)
                paused = student.stats()["cpu_seconds"]
                student.resume()
                time.sleep(1.0)
                out.append(json.dumps({"cpu": [first, paused, student.stats()["cpu_seconds"]]}))
    except ChannelError as exc:
        out.append(json.dumps({"error": str(exc)}))
    out.append(json.dumps({"judge_alive": True}))
    return out
