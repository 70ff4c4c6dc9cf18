"""How the written test lab's questions are marked (grader-only, as a course lab's rubrics are)."""
from util.rubric import Item, Rubric

RUBRICS = {
    "902.Q1": Rubric(items=(
        Item("A", 1, "Names the number", note="41, in words or digits"),
        Item("B", 1, "Says why", note="any reason given counts"),
        Item("X", -1, "Claims it is 42", note="a common mix-up with task 902.2"),
    ), notes="Two short points."),
    "902.Q2": Rubric(items=(Item("A", 1, "Says it is the answer to everything"),)),
}
