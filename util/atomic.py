"""Writing a file so that readers see the old file or the new one, never half of one.

The course's one atomic writer: answers a notebook exports (:mod:`util.answers`), the model export
caches (:mod:`util.export_cache`) and every file the grader writes (``grader.core.files``) go
through :func:`write_atomic`. The content is written to a temporary file in the same folder, given
its final mode, then renamed over the target (``os.replace``): a notebook that dies halfway, or a
grader and a reader running side by side, never see a partial file.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def default_mode() -> int:
    """The mode ``open()`` gives a new file here: 0666 less the process's umask (0644 under the usual 022);
    ``mkstemp``'s 0600 is never kept."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, content: bytes | Callable[[Path], None], *, mode: int | None = None) -> Path:
    """Write ``content`` to ``path`` atomically and return ``path``.

    ``content`` is the file's bytes, or a function that writes the file at the (temporary) path it is
    given (``torch.jit.ScriptModule.save``). ``mode`` defaults to :func:`default_mode`. The folder is
    made if needed; on any error the temporary file is removed and the old ``path`` stays as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if isinstance(content, (bytes, bytearray)):
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
        else:
            os.close(fd)
            content(Path(tmp))
        os.chmod(tmp, default_mode() if mode is None else mode)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
