"""Reporting grades: per-student feedback in Markdown and HTML (``feedback``), the class built from
every stored record (``class_folder``) into gradebooks (``gradebook``), statistics (``stats``), the
class report page (``report_page``) and LMS upload files (``export``, one layout per module of
``lms/``); the instructor's roster, overrides, late policy and remembered settings (``roster``,
``overrides``, ``late``, ``settings``). It imports only ``grader.core``."""
