"""The course's autograder: build the student copies, regenerate references, grade submissions.

Subpackages by responsibility: ``execute``/``run`` run a notebook, ``score``/``compare`` judge it,
``results``/``gradebook`` report it, ``build``/``markers`` make the student copies,
``references`` makes and checks the expected answers. ``cli`` only parses arguments.
"""
