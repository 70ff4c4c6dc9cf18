"""Reporting grades: result dataclasses (``results``), per-student feedback in Markdown and HTML
(``feedback``), the class built from every stored result (``classbook``) into gradebooks
(``gradebook``), statistics (``stats``), the class report page (``class_report``) and LMS exports
(``export``); the instructor's roster, overrides, late policy and remembered settings (``roster``,
``overrides``, ``late``, ``settings``); and how text and files are written safely (``safe_text``,
``files``)."""
