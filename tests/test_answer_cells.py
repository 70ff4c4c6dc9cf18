"""The build and written questions: the solution's answer cells are checked against the declaration, the
students' copy gets the generated cell (never the model answer), the examples keep it as a student's."""
from __future__ import annotations

import json

import nbformat
import writtenlab
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.author import answer_cells, build
from util import written
from util.labs import LABS

LAB = writtenlab.LAB
MODEL = "Forty-one: the task fixes it, as the first cell shows."


def _solution() -> nbformat.NotebookNode:
    cells = [new_markdown_cell("## Task 902.1: First (5 points)\n\n**Q1.** Why is the\nanswer 41?"),
             new_code_cell("x = 41"),
             new_markdown_cell(f"{written.heading(writtenlab.Q1)}\n\n{MODEL}"),
             new_markdown_cell("## Task 902.2: Second (5 points)\n\nWhy is the answer 42? What would you try next?"),
             new_code_cell("y = 42"),
             new_markdown_cell(f"{written.heading(writtenlab.Q2)}\n\nIt is the answer to everything."),
             new_markdown_cell(f"{written.heading(writtenlab.PRACTICE)}\n\nA bigger number."),
             new_code_cell("progress('lab902')")]
    return new_notebook(cells=cells, metadata={"course": {"lab": "lab902"}})


def test_a_solution_with_its_answer_cells_as_declared_has_no_problem():
    assert answer_cells.problems(LAB, _solution(), "solutions/lab902") == []


def test_the_students_copy_gets_the_generated_answer_cell_and_nothing_of_the_model_answer():
    copy = answer_cells.for_students(LAB, _solution())
    cell = copy.cells[2]
    assert cell.source == written.answer_cell_source(writtenlab.Q1)
    assert cell.metadata == {"course": {"written": "902.Q1"}}
    text = json.dumps(copy)
    assert MODEL not in text and "answer to everything" not in text and "A bigger number" not in text
    assert written.find(json.loads(nbformat.writes(copy)), writtenlab.Q1).text == ""


def test_the_examples_keep_the_model_answer_read_as_a_students():
    example = answer_cells.for_examples(LAB, _solution())
    answer = written.find(json.loads(nbformat.writes(example)), writtenlab.Q1)
    assert (answer.text, answer.found) == (MODEL, "cell")


def test_each_way_a_solution_can_disagree_with_the_declaration_is_named():
    nb = _solution()
    nb.cells[2].source = nb.cells[2].source.replace("2 points", "3 points")
    nb.cells[0].source = "## Task 902.1: First (5 points)\n\nWhy?"
    nb.cells.insert(3, new_markdown_cell("More text after the answer."))
    nb.cells.append(new_markdown_cell("#### Answer to Q9 (1 point, graded by hand; 1-5 words)\n\nx"))
    nb.cells.pop(6)  # Q2's answer cell
    found = answer_cells.problems(LAB, nb, "sol")
    assert found == [
        "sol: cell 8 is an answer cell for Q9, which is not a written question of lab902",
        "sol: cell 2 is headed '#### Answer to Q1 (3 points, graded by hand; 3-40 words)' but the declaration says "
        "'#### Answer to Q1 (2 points, graded by hand; 3-40 words)'",
        "sol: the prompt of 902.Q1 ('Why is the answer 41?'...) is not stated in task 902.1's text before its answer "
        "cell (Written.prompt must be the handout's words)",
        "sol: cell 3, after the answer cell of 902.Q1, is Markdown without a heading: a student's answer would "
        "swallow it; start it with a heading or move it",
        "sol: expected one answer cell '#### Answer to Q2 (1 point, graded by hand; 1-20 words)' for 902.Q2, found 0: "
        "put the model answer in one Markdown cell under that heading"]


def test_every_course_lab_generates_an_answer_cell_per_written_question_and_leaks_no_model_answer():
    for lab in LABS.values():
        if not lab.written:
            continue
        solution = nbformat.read(str(build.SOLUTIONS / lab.notebook), as_version=4)
        handout = json.loads((build.LABS / lab.notebook).read_text(encoding="utf-8"))
        for question in lab.written:
            answer = written.find(handout, question)
            assert (answer.found, answer.text) == ("cell", ""), (lab.name, question.id)
            model = written.find(json.loads(nbformat.writes(solution)), question).text
            assert model and model not in json.dumps(handout), (lab.name, question.id)
