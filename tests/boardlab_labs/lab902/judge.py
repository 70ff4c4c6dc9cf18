"""The leaderboard test lab's judge: passes a file of at least ``spec["n"]`` bytes and reports, as facts, its
"speed" (len / n) and the band within which two speeds tie ("noise", 1.1)."""


def check_speed(spec, data, tolerance):
    problems = [] if len(data) >= spec["n"] else [f"only {len(data)} bytes of {spec['n']}"]
    return problems, {"speed": len(data) / spec["n"], "noise": 1.1, "ignored": object.__name__}
