"""The tiny test lab's declaration: two one-line tasks, so each graded kernel takes about a second."""
from util.contract import Lab, Task

LAB = Lab(name="lab900", title="Grader test lab", notebook="lab900_tiny.ipynb", tasks=(
    Task(id="900.1", title="First", answer_points=5, answer="the int 41"),
    Task(id="900.2", title="Second", answer_points=5, answer="the int 42"),
))
