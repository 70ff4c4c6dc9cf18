from grader.report import gradebook
from grader.report.results import CheckResult, SubmissionResult, TaskResult


def _result(lab, task_id, status, score, max_score, execution="completed"):
    check = CheckResult("answer", status, score, max_score, "")
    return SubmissionResult(f"{lab}.ipynb", lab, (TaskResult(task_id, "T", (check,)),), 1.0, execution)


def test_one_table_per_lab_with_only_its_tasks():
    text = gradebook.render([("amy", _result("lab1", "1.1", "passed", 6, 6)),
                             ("bob", _result("lab2", "2.1", "failed", 0, 4)),
                             ("cat", _result("lab1", "1.1", "missing", 0, 6, "timeout"))])
    first, second = text.split("\n\n")
    assert "1.1" in first and "2.1" not in first and "2.1" in second and "1.1" not in second
    assert [line.split()[-1] for line in first.splitlines()[2:]] == ["passed", "timeout"]
    assert second.splitlines()[2].split()[-2:] == ["0/4", "failed"]


def test_csv_keeps_every_lab_in_one_file(tmp_path):
    gradebook.write_csv(tmp_path / "g.csv", [("amy", _result("lab1", "1.1", "passed", 6, 6)),
                                             ("bob", _result("lab2", "2.1", "failed", 0, 4))])
    lines = (tmp_path / "g.csv").read_text().splitlines()
    assert lines == ["submission,lab,1.1,2.1,total,status", "amy,lab1,6,,6/6,all passed", "bob,lab2,,0,0/4,failed"]
