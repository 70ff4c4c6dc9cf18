"""Lab 15 example submissions: the solution with one realistic mistake each."""
from util.contract import ANSWER, Mistake

MISTAKES: tuple[Mistake, ...] = ()
